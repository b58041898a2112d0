"""Oracle MySQL from Debian's unstable suite (sid), unpacked into a cache and
run in place: nothing is installed system-wide.

No registry reachable from these machines has MySQL 8.4 or 9.x for Debian 12,
but sid ships Oracle's current LTS release. A private apt configuration (its
own sources list naming sid of the archive this machine already uses, its own
lists and cache, an empty dpkg status) downloads the server, the client and
their libraries; ``dpkg-deb -x`` unpacks them into one root. sid's programs
need a newer glibc than the host's, so they run through sid's own loader
(``command()``). The root is kept in ``CACHE/mysql-VERSION`` and reused: sid
moves on and drops old versions, so whatever version it has when the cache is
empty (or when asked to look again) is the one used, and named.
"""

from __future__ import annotations

import fcntl
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

PACKAGES = ("mysql-server-core", "mysql-client-core")
# Perl serves only MySQL's helper scripts, never mysqld or mysql.
LEFT_OUT = re.compile(r"^(perl|perl-base|perl-modules-[0-9.]+|libperl[0-9.]+)$")
SOURCES = (Path("/etc/apt/sources.list.d/debian.sources"), Path("/etc/apt/sources.list"))
KEYRING = "/usr/share/keyrings/debian-archive-keyring.gpg"
# (multiarch triplet, loader) by machine: sid's loader runs its binaries here.
LOADERS = {
    "x86_64": ("x86_64-linux-gnu", "ld-linux-x86-64.so.2"),
    "aarch64": ("aarch64-linux-gnu", "ld-linux-aarch64.so.1"),
}


class NoMySQL(RuntimeError):
    """No MySQL server can be had: none cached, and none obtainable from sid."""


def cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "django-dbqueue"


def cached() -> list[tuple[str, Path]]:
    """The unpacked servers in the cache, (version, root), newest provisioned last."""
    roots = [path for path in cache_dir().glob("mysql-*") if (path / "VERSION").is_file()]
    roots.sort(key=lambda path: (path / "VERSION").stat().st_mtime)
    return [((path / "VERSION").read_text().strip(), path) for path in roots]


def archive_uri() -> str:
    """The Debian archive this machine's apt configuration names (not its
    security archive): sid is fetched from the same place."""
    for path in SOURCES:
        if not path.is_file():
            continue
        text = path.read_text()
        for stanza in re.split(r"\n\s*\n", text):  # deb822: "URIs:" and "Suites:" fields
            uris = re.search(r"^URIs:\s*(\S+)", stanza, re.MULTILINE)
            suites = re.search(r"^Suites:\s*(.+)$", stanza, re.MULTILINE)
            if uris and suites and not any(s.endswith("-security") for s in suites.group(1).split()):
                return uris.group(1)
        for line in text.splitlines():  # one-line form: deb [options] URI SUITE COMPONENTS
            words = re.sub(r"\[[^]]*\]", " ", line).split()
            if len(words) >= 3 and words[0] == "deb" and not words[2].endswith("-security"):
                return words[1]
    raise NoMySQL(
        f"No Debian archive is named in {' or '.join(map(str, SOURCES))}: sid's MySQL cannot be fetched."
    )


class SidApt:
    """apt-get and apt-cache on a private configuration that knows only sid."""

    def __init__(self, scratch: Path) -> None:
        missing = [tool for tool in ("apt-get", "apt-cache", "dpkg-deb") if shutil.which(tool) is None]
        if missing or not Path(KEYRING).is_file():
            raise NoMySQL(
                f"Fetching MySQL from Debian sid needs apt-get, apt-cache, dpkg-deb and {KEYRING} "
                f"(a Debian host); missing here: {', '.join(missing) or KEYRING}."
            )
        self.scratch = scratch
        (scratch / "lists" / "partial").mkdir(parents=True)
        (scratch / "cache" / "archives" / "partial").mkdir(parents=True)
        sources = scratch / "sources.list"
        sources.write_text(f"deb [signed-by={KEYRING}] {archive_uri()} sid main\n")
        self.options = [
            f"-oDir::Etc::SourceList={sources}",
            "-oDir::Etc::SourceParts=/nonexistent",
            f"-oDir::State::Lists={scratch / 'lists'}",
            f"-oDir::Cache={scratch / 'cache'}",
            "-oDir::State::status=/dev/null",
        ]
        if os.geteuid() == 0:  # apt's _apt user could not write into root's private scratch folder
            self.options.append("-oAPT::Sandbox::User=root")

    def run(self, tool: str, *args: str, cwd: Path | None = None) -> str:
        done = subprocess.run(
            [tool, *self.options, *args],
            cwd=cwd,
            capture_output=True,
            text=True,
            env={**os.environ, "LC_ALL": "C"},
        )
        if done.returncode != 0:
            raise NoMySQL(f"{tool} {' '.join(args[:2])} failed against sid:\n{done.stderr.strip()[-2000:]}")
        return done.stdout

    def candidate(self, package: str) -> str | None:
        found = re.search(
            r"^Version: (\S+)", self.run("apt-cache", "show", "--no-all-versions", package), re.M
        )
        return found.group(1) if found else None

    def closure(self) -> list[str]:
        """The packages the server and client need, recursively, perl left out."""
        out = self.run(
            "apt-cache", "depends", "--recurse", "--no-recommends", "--no-suggests", "--no-conflicts",
            "--no-breaks", "--no-replaces", "--no-enhances", *PACKAGES,
        )  # fmt: skip
        names = {line.strip() for line in out.splitlines() if line and not line[0].isspace()}
        return sorted(name for name in names if not name.startswith("<") and not LEFT_OUT.match(name))


def provision() -> tuple[str, Path]:
    """Fetch sid's MySQL into the cache unless that version is there already;
    return (version, root)."""
    cache = cache_dir()
    cache.mkdir(parents=True, exist_ok=True)
    with open(cache / "mysql.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # two provisioners at once would unpack twice
        with tempfile.TemporaryDirectory(prefix="mysql-sid-", dir=cache) as scratch:
            apt = SidApt(Path(scratch))
            apt.run("apt-get", "update")
            version = apt.candidate(PACKAGES[0])
            if version is None:
                raise NoMySQL(f"Debian sid has no {PACKAGES[0]} package.")
            root = cache / f"mysql-{version}"
            if not (root / "VERSION").is_file():
                unpack(apt, Path(scratch), root, version)
            (root / "VERSION").touch()  # the newest provisioned is the one used next
            return version, root


def unpack(apt: SidApt, scratch: Path, root: Path, version: str) -> None:
    debs = scratch / "debs"
    debs.mkdir()
    apt.run("apt-get", "download", *apt.closure(), cwd=debs)
    partial = scratch / "root"
    for deb in sorted(debs.glob("*.deb")):
        subprocess.run(["dpkg-deb", "-x", str(deb), str(partial)], check=True)
    (partial / "VERSION").write_text(version + "\n")
    shutil.rmtree(root, ignore_errors=True)
    partial.rename(root)  # whole or absent: a half-unpacked root is never used


def obtain(refresh: bool = False) -> tuple[str, Path]:
    """The MySQL to run: the newest in the cache, or (empty cache, or
    ``refresh``) what sid has now; a cached one when sid cannot be reached."""
    have = cached()
    if have and not refresh:
        return have[-1]
    try:
        return provision()
    except NoMySQL as error:
        if have:
            print(f"{error}\nUsing the cached MySQL {have[-1][0]} instead.", file=sys.stderr)
            return have[-1]
        raise


def command(root: Path, program: str, *args: str) -> list[str]:
    """The command line running ``program`` (such as ``usr/sbin/mysqld``)
    of the unpacked root with sid's loader and libraries."""
    machine = platform.machine()
    if machine not in LOADERS:
        raise NoMySQL(f"sid's MySQL is run here only on {' or '.join(LOADERS)}, not on {machine}.")
    triplet, loader = LOADERS[machine]
    libs = root / "usr" / "lib" / triplet
    return [str(libs / loader), "--library-path", f"{libs}:{libs}/mysql/private", str(root / program), *args]
