"""Semantic versions as Kubernetes' CEL semver library reads them (k8s.io/apiserver
`library.SemverLib`, which parses with github.com/blang/semver/v4): `MAJOR.MINOR.PATCH`, an
optional `-prerelease` and `+build`, no leading zeros; with normalization, a `v` prefix dropped,
leading zeros removed and a missing minor or patch filled in with 0.

The CEL host carries a version as its canonical text (`canonical`): the same text for versions
the library calls equal (build metadata never takes part in a comparison), so comparing two as
strings agrees with comparing them as versions.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

_DIGITS = frozenset("0123456789")
_IDENTIFIER = frozenset("0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ-")


class SemverError(ValueError):
    """Not a semantic version (the message says why)."""


@dataclass(frozen=True, slots=True)
class Version:
    major: int
    minor: int
    patch: int
    prerelease: tuple[int | str, ...] = ()

    @property
    def release(self) -> tuple[int, int, int]:
        return (self.major, self.minor, self.patch)

    @property
    def canonical(self) -> str:
        pre = "-" + ".".join(str(p) for p in self.prerelease) if self.prerelease else ""
        return f"{self.major}.{self.minor}.{self.patch}{pre}"


def _number(text: str, what: str) -> int:
    if not text or not set(text) <= _DIGITS:
        raise SemverError(f"invalid character(s) found in {what} number {text!r}")
    if len(text) > 1 and text[0] == "0":
        raise SemverError(f"{what} number must not contain leading zeroes {text!r}")
    value = int(text)
    if value >= 2**64:
        raise SemverError(f"{what} number out of range {text!r}")
    return value


def _prerelease(part: str) -> int | str:
    if not part:
        raise SemverError("prerelease is empty")
    if set(part) <= _DIGITS:
        return _number(part, "prerelease")
    if not set(part) <= _IDENTIFIER:
        raise SemverError(f"invalid character(s) found in prerelease {part!r}")
    return part


@lru_cache(maxsize=1024)
def parse(text: str) -> Version:
    """A version as blang/semver's Parse reads it; SemverError otherwise."""
    if not text:
        raise SemverError("version string empty")
    parts = text.split(".", 2)
    if len(parts) != 3:
        raise SemverError("no Major.Minor.Patch elements found")
    major, minor = _number(parts[0], "major"), _number(parts[1], "minor")
    patch_text, _, build = parts[2].partition("+")
    if "+" in parts[2] and not all(b and set(b) <= _IDENTIFIER for b in build.split(".")):
        raise SemverError(f"invalid build metadata {build!r}")
    patch_text, dash, pre = patch_text.partition("-")
    prerelease = tuple(_prerelease(p) for p in pre.split(".")) if dash else ()
    return Version(major, minor, _number(patch_text, "patch"), prerelease)


def normalized(text: str) -> Version:
    """A version as the library's `semver(s, true)` reads it."""
    parts = text.removeprefix("v").split(".", 2)
    for i, part in enumerate(parts):
        if len(part) > 1:
            part = part.lstrip("0")
            if not part or part[0] not in _DIGITS:
                part = "0" + part
            parts[i] = part
    if len(parts) < 3:
        if any(c in parts[-1] for c in "+-"):
            raise SemverError("short version cannot contain PreRelease/Build meta data")
        parts += ["0"] * (3 - len(parts))
    return parse(".".join(parts))


def is_version(text: str) -> bool:
    try:
        parse(text)
    except SemverError:
        return False
    return True


def _order(a: int | str, b: int | str) -> int:
    if isinstance(a, int) and isinstance(b, int):
        return (a > b) - (a < b)
    if isinstance(a, int):
        return -1  # numeric identifiers have lower precedence than alphanumeric ones
    if isinstance(b, int):
        return 1
    return (a > b) - (a < b)


def compare(a: Version, b: Version) -> int:
    """-1, 0 or 1, as semver orders versions (build metadata ignored)."""
    if a.release != b.release:
        return -1 if a.release < b.release else 1
    if not a.prerelease or not b.prerelease:
        return (not a.prerelease) - (not b.prerelease)
    for x, y in zip(a.prerelease, b.prerelease, strict=False):
        order = _order(x, y)
        if order:
            return order
    return (len(a.prerelease) > len(b.prerelease)) - (len(a.prerelease) < len(b.prerelease))
