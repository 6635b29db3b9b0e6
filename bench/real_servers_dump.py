"""Record the ``tools/list`` of real MCP servers into a ToolGym-shaped ``.ndjson``.

Usage: ``python bench/real_servers_dump.py [--config bench/data/real_servers.json]
[--npm-prefix DIR] [--py-prefix DIR] [--install] [--only NAME ...] [--out FILE]``

The config (``bench/data/real_servers.json``) names each server and how to start it::

    {"servers": {"<name>": {"ecosystem": "npm" | "pypi", "package": "<registry name>",
                             "command": "...", "args": [...], "env": {...}}}}

``command`` and ``args`` may hold ``{npm}`` (the npm prefix: ``{npm}/node_modules/.bin``
holds the installed commands), ``{py}`` (the folder of one virtualenv per PyPI package:
``{py}/<package>/bin``) and ``{workdir}`` (a scratch folder made for the run, for servers
that want a directory or a repository to serve). ``env`` holds dummy API keys: the
servers list their tools without calling their service. ``--install`` first installs
every package from its registry with the ordinary clients (``npm install`` into the npm
prefix, ``pip install`` into one virtualenv per PyPI package).

Each server is started over stdio with the ``mcp`` SDK, every page of ``tools/list`` is
read (following ``nextCursor``), and one JSON object per server is written:
``qualifiedName`` (the config name), ``package``, ``version`` (the installed version),
``serverInfo`` and ``description`` (the server's ``instructions``, if any), and ``tools[]``
with ``name``, ``title``, ``description``, ``inputSchema``, ``annotations`` (as sent;
absent keys left out). ``bench/_catalog.py``'s ``load_catalog`` reads the file as a
ToolGym catalog. A server that cannot start or list within ``--timeout`` seconds is
reported on stderr and left out; the file keeps the config's order.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import subprocess
import sys
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import mcp.types as mt
from mcp.client.stdio import StdioServerParameters, stdio_client

from mcp import ClientSession

__all__ = ["dump_server", "installed_version", "load_config", "main"]

HERE = Path(__file__).resolve().parent
TOOL_KEYS = ("name", "title", "description", "inputSchema", "outputSchema", "annotations")


def load_config(path: Path) -> dict[str, dict[str, Any]]:
    """The ``servers`` block of the config at ``path``. Exits with a message when malformed."""
    try:
        servers = json.loads(path.read_text(encoding="utf-8"))["servers"]
    except (OSError, json.JSONDecodeError, KeyError) as exc:
        raise SystemExit(
            f"real_servers_dump: cannot read {path} ({exc}); it needs a 'servers' object"
        ) from exc
    for name, spec in servers.items():
        missing = {"ecosystem", "package", "command"} - set(spec)
        if missing:
            raise SystemExit(f"real_servers_dump: {path}: server {name!r} lacks {sorted(missing)}")
    return servers


def _expand(text: str, places: dict[str, str]) -> str:
    for key, value in places.items():
        text = text.replace("{" + key + "}", value)
    return text


def installed_version(spec: dict[str, Any], npm: Path, py: Path) -> str | None:
    """The installed version of ``spec``'s package, read from the install itself."""
    if spec["ecosystem"] == "npm":
        meta = npm / "node_modules" / spec["package"] / "package.json"
        try:
            return str(json.loads(meta.read_text(encoding="utf-8"))["version"])
        except (OSError, KeyError, json.JSONDecodeError):
            return None
    python = py / spec["package"] / "bin" / "python"
    code = f"import importlib.metadata as m; print(m.version({spec['package']!r}))"
    done = subprocess.run([str(python), "-c", code], capture_output=True, text=True, check=False)
    return done.stdout.strip() or None


def install(servers: dict[str, dict[str, Any]], npm: Path, py: Path) -> None:
    """Install every package with its registry's ordinary client (npm, pip)."""
    npm.mkdir(parents=True, exist_ok=True)
    if not (npm / "package.json").exists():
        subprocess.run(["npm", "init", "-y"], cwd=npm, check=True, capture_output=True)
    wanted = sorted({s["package"] for s in servers.values() if s["ecosystem"] == "npm"})
    if wanted:
        subprocess.run(["npm", "install", "--no-audit", "--no-fund", *wanted], cwd=npm, check=True)
    for package in sorted({s["package"] for s in servers.values() if s["ecosystem"] == "pypi"}):
        venv = py / package
        if not (venv / "bin" / "python").exists():
            subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        subprocess.run([str(venv / "bin" / "pip"), "install", "-q", package], check=True)


def _tool(raw: dict[str, Any]) -> dict[str, Any]:
    out = {key: raw[key] for key in TOOL_KEYS if raw.get(key) is not None}
    if isinstance(out.get("annotations"), dict):
        out["annotations"] = {k: v for k, v in out["annotations"].items() if v is not None}
    return out


async def dump_server(
    name: str, spec: dict[str, Any], places: dict[str, str], timeout: float, errlog: Path
) -> dict[str, Any]:
    """Start ``spec`` over stdio, read every page of ``tools/list``; one ToolGym-shaped entry."""
    env = {**os.environ, **{k: _expand(str(v), places) for k, v in (spec.get("env") or {}).items()}}
    params = StdioServerParameters(
        command=_expand(spec["command"], places),
        args=[_expand(str(a), places) for a in spec.get("args") or []],
        env=env,
        cwd=places["workdir"],
    )
    tools: list[dict[str, Any]] = []
    async with AsyncExitStack() as stack, asyncio.timeout(timeout):
        log = stack.enter_context(errlog.open("w", encoding="utf-8"))
        read, write = await stack.enter_async_context(stdio_client(params, errlog=log))
        session = await stack.enter_async_context(ClientSession(read, write))
        init = await session.initialize()
        cursor: str | None = None
        seen: set[str] = set()
        while True:
            params = mt.PaginatedRequestParams(cursor=cursor) if cursor else None
            page = await session.list_tools(params=params)
            tools += [_tool(t.model_dump(mode="json", by_alias=True, exclude_none=True)) for t in page.tools]
            cursor = page.next_cursor
            if not cursor:
                break
            if cursor in seen:
                raise RuntimeError(f"tools/list repeated cursor {cursor!r}")
            seen.add(cursor)
    entry: dict[str, Any] = {
        "qualifiedName": name,
        "package": spec["package"],
        "ecosystem": spec["ecosystem"],
        "serverInfo": {"name": init.server_info.name, "version": init.server_info.version},
    }
    if init.instructions:
        entry["description"] = init.instructions
    entry["tools"] = tools
    return entry


def _reason(exc: BaseException) -> str:
    """The innermost errors of ``exc`` (the SDK wraps them in task-group exception groups)."""
    if isinstance(exc, BaseExceptionGroup):
        return "; ".join(_reason(e) for e in exc.exceptions)
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__


def _workdir(root: Path) -> None:
    """A small folder and git repository for servers that serve one."""
    repo = root / "repo"
    repo.mkdir(parents=True, exist_ok=True)
    (repo / "README.md").write_text("scratch\n", encoding="utf-8")
    quiet = {"check": True, "capture_output": True, "cwd": repo}
    subprocess.run(["git", "init", "-q"], **quiet)
    subprocess.run(["git", "-c", "user.name=x", "-c", "user.email=x@example.org", "add", "."], **quiet)
    subprocess.run(
        ["git", "-c", "user.name=x", "-c", "user.email=x@example.org", "commit", "-qm", "init"], **quiet
    )


async def _run(args: argparse.Namespace) -> int:
    servers = load_config(args.config)
    if args.only:
        unknown = set(args.only) - set(servers)
        if unknown:
            raise SystemExit(f"real_servers_dump: not in the config: {sorted(unknown)}")
        servers = {n: s for n, s in servers.items() if n in args.only}
    npm, py = args.npm_prefix.resolve(), args.py_prefix.resolve()
    if args.install:
        install(servers, npm, py)
    entries: list[dict[str, Any]] = []
    # A fixed scratch folder (made afresh): servers that echo their paths in their
    # instructions then record the same text on every run.
    work = args.workdir.resolve()
    shutil.rmtree(work, ignore_errors=True)
    _workdir(work)
    places = {"npm": str(npm), "py": str(py), "workdir": str(work)}
    log_dir = args.log_dir
    log_dir.mkdir(parents=True, exist_ok=True)
    for name, spec in servers.items():
        try:
            entry = await dump_server(name, spec, places, args.timeout, log_dir / f"{name}.log")
        except Exception as exc:  # a server that cannot start is left out, and said so
            print(
                f"{name}: left out ({_reason(exc)}; its stderr is in {log_dir / name}.log)", file=sys.stderr
            )
            continue
        version = installed_version(spec, npm, py) or entry["serverInfo"]["version"]
        entry = {"qualifiedName": name, "package": spec["package"], "version": version} | entry
        entries.append(entry)
        print(f"{name}: {len(entry['tools'])} tools ({spec['package']} {version})", file=sys.stderr)
    recorded = len(entries)
    if args.only and args.out.exists():  # re-record some servers, keep the others
        fresh = {e["qualifiedName"]: e for e in entries}
        kept = {
            e["qualifiedName"]: e for e in map(json.loads, args.out.read_text(encoding="utf-8").splitlines())
        }
        order = load_config(args.config)
        entries = [fresh.get(n) or kept[n] for n in order if n in fresh or n in kept]
    args.out.parent.mkdir(parents=True, exist_ok=True)
    with args.out.open("w", encoding="utf-8") as handle:
        for entry in entries:
            handle.write(json.dumps(entry, ensure_ascii=False, sort_keys=False) + "\n")
    total = sum(len(e["tools"]) for e in entries)
    print(f"wrote {args.out}: {len(entries)} servers, {total} tools", file=sys.stderr)
    return 0 if recorded == len(servers) else 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Record real MCP servers' tools/list as a ToolGym .ndjson.")
    parser.add_argument("--config", type=Path, default=HERE / "data" / "real_servers.json")
    parser.add_argument("--out", type=Path, default=HERE / "data" / "real_servers.ndjson")
    parser.add_argument("--npm-prefix", type=Path, default=Path("/tmp/real-servers/npm"))
    parser.add_argument("--py-prefix", type=Path, default=Path("/tmp/real-servers/py"))
    parser.add_argument("--install", action="store_true", help="npm/pip install the packages first")
    parser.add_argument("--only", nargs="+", help="only these config names")
    parser.add_argument("--workdir", type=Path, default=Path("/tmp/real-servers/work"), help="scratch folder")
    parser.add_argument(
        "--log-dir", type=Path, default=Path("/tmp/real-servers/logs"), help="servers' stderr"
    )
    parser.add_argument("--timeout", type=float, default=60.0, help="seconds per server (60)")
    return asyncio.run(_run(parser.parse_args(argv)))


if __name__ == "__main__":
    raise SystemExit(main())
