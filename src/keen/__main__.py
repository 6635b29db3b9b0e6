"""``python -m keen``: the same CLI as the ``keen`` console script."""

from keen.cli import main

if __name__ == "__main__":
    main()
