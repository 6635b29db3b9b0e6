"""Unit conversion for the demo server's ``convert_units`` tool (pure, no I/O).

Quantities: length, mass, temperature, data size, time. Every non-temperature unit is a
factor to the quantity's base unit (metre, kilogram, byte, second); temperatures convert
through kelvin. Unit names are matched case-insensitively, with common long names and
plurals as aliases (``"km"``, ``"kilometre"``, ``"kilometers"``). Data sizes use SI
prefixes for ``KB``/``MB``/… (powers of 1000) and IEC ones for ``KiB``/``MiB``/…
(powers of 1024); bits are spelt ``bit``, ``kbit``, ``Mbit``, ``Gbit``.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["QUANTITIES", "Conversion", "UnitError", "convert", "supported_units_text"]


class UnitError(ValueError):
    """A unit is unknown or the two units measure different quantities; the message lists
    the supported units."""


@dataclass(frozen=True, slots=True)
class Conversion:
    """One conversion: ``value`` ``from_unit`` is ``result`` ``to_unit`` (canonical unit names)."""

    quantity: str
    value: float
    from_unit: str
    to_unit: str
    result: float


# quantity -> canonical unit -> (factor to base unit, aliases)
_FACTORS: dict[str, dict[str, tuple[float, tuple[str, ...]]]] = {
    "length": {
        "mm": (1e-3, ("millimeter", "millimetre")),
        "cm": (1e-2, ("centimeter", "centimetre")),
        "m": (1.0, ("meter", "metre")),
        "km": (1e3, ("kilometer", "kilometre")),
        "in": (0.0254, ("inch", "inches")),
        "ft": (0.3048, ("foot", "feet")),
        "yd": (0.9144, ("yard",)),
        "mi": (1609.344, ("mile",)),
        "nmi": (1852.0, ("nautical mile", "nautical_mile")),
    },
    "mass": {
        "mg": (1e-6, ("milligram",)),
        "g": (1e-3, ("gram",)),
        "kg": (1.0, ("kilogram",)),
        "t": (1e3, ("tonne", "metric ton")),
        "oz": (0.028349523125, ("ounce",)),
        "lb": (0.45359237, ("pound", "lbs")),
        "st": (6.35029318, ("stone",)),
    },
    "data": {
        "bit": (0.125, ("bits",)),
        "kbit": (125.0, ("kilobit",)),
        "Mbit": (125e3, ("megabit",)),
        "Gbit": (125e6, ("gigabit",)),
        "B": (1.0, ("byte",)),
        "KB": (1e3, ("kilobyte",)),
        "MB": (1e6, ("megabyte",)),
        "GB": (1e9, ("gigabyte",)),
        "TB": (1e12, ("terabyte",)),
        "KiB": (1024.0, ("kibibyte",)),
        "MiB": (1024.0**2, ("mebibyte",)),
        "GiB": (1024.0**3, ("gibibyte",)),
        "TiB": (1024.0**4, ("tebibyte",)),
    },
    "time": {
        "ms": (1e-3, ("millisecond",)),
        "s": (1.0, ("sec", "second")),
        "min": (60.0, ("minute",)),
        "h": (3600.0, ("hr", "hour")),
        "d": (86400.0, ("day",)),
        "wk": (604800.0, ("week",)),
    },
}
_TEMPERATURES: dict[str, tuple[str, ...]] = {
    "C": ("celsius", "degc", "°c"),
    "F": ("fahrenheit", "degf", "°f"),
    "K": ("kelvin",),
}

QUANTITIES: tuple[str, ...] = (*_FACTORS, "temperature")


def _build_index() -> dict[str, tuple[str, str]]:
    index: dict[str, tuple[str, str]] = {}
    for quantity, units in _FACTORS.items():
        for unit, (_, aliases) in units.items():
            for name in (unit, *aliases):
                index[name.lower()] = (quantity, unit)
                if len(name) >= 3 and not name.endswith("s"):
                    index[name.lower() + "s"] = (quantity, unit)
    for unit, aliases in _TEMPERATURES.items():
        for name in (unit, *aliases):
            index[name.lower()] = ("temperature", unit)
    return index


_INDEX = _build_index()


def supported_units_text() -> str:
    """One line per quantity, e.g. ``length: mm, cm, m, km, in, ft, yd, mi, nmi``."""
    lines = [f"{quantity}: {', '.join(units)}" for quantity, units in _FACTORS.items()]
    lines.append(f"temperature: {', '.join(_TEMPERATURES)}")
    return "\n".join(lines)


def _lookup(unit: str) -> tuple[str, str]:
    found = _INDEX.get(unit.strip().lower())
    if found is None:
        raise UnitError(
            f"unknown unit {unit!r}; supported units (long names and plurals work too):\n"
            f"{supported_units_text()}"
        )
    return found


def _to_kelvin(value: float, unit: str) -> float:
    if unit == "C":
        return value + 273.15
    if unit == "F":
        return (value - 32.0) * 5.0 / 9.0 + 273.15
    return value


def _from_kelvin(value: float, unit: str) -> float:
    if unit == "C":
        return value - 273.15
    if unit == "F":
        return (value - 273.15) * 9.0 / 5.0 + 32.0
    return value


def convert(value: float, from_unit: str, to_unit: str) -> Conversion:
    """Convert ``value`` from ``from_unit`` to ``to_unit``.

    Raises :class:`UnitError` for an unknown unit, for units of different quantities, and
    for a temperature below absolute zero. The result is rounded to 12 significant digits
    so ``1 km -> 1000 m`` does not print as ``999.9999999999999``.
    """
    quantity, src = _lookup(from_unit)
    other, dst = _lookup(to_unit)
    if quantity != other:
        raise UnitError(
            f"cannot convert {quantity} ({src}) to {other} ({dst}); pick two units of the same "
            f"quantity:\n{supported_units_text()}"
        )
    if quantity == "temperature":
        kelvin = _to_kelvin(value, src)
        if kelvin < 0:
            raise UnitError(f"{value} {src} is below absolute zero; check the value and the unit")
        result = _from_kelvin(kelvin, dst)
    else:
        units = _FACTORS[quantity]
        result = value * units[src][0] / units[dst][0]
    return Conversion(quantity, value, src, dst, float(f"{result:.12g}"))
