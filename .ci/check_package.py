"""Checks on the built distributions that twine does not make: the wheel
carries the app's data files, the sdist carries no development-only files,
and the metadata declares what the README promises.

Usage: python .ci/check_package.py DIST_DIR (./dev package runs it)."""

import sys
import tarfile
import zipfile
from email.parser import Parser
from pathlib import Path

# The app does not work without these: migrations, admin templates and
# static files, and the marker that its type hints are public.
WHEEL_NEEDS = (
    "django_dbqueue/migrations/0001_initial.py",
    "django_dbqueue/templates/admin/django_dbqueue/",
    "django_dbqueue/static/django_dbqueue/",
    "django_dbqueue/py.typed",
)
SDIST_NEEDS = ("LICENSE", "README.md", "CHANGELOG.md", "pyproject.toml", "docs/conf.py", "django_dbqueue/")
# Development only: these stay in the repository.
SDIST_REFUSES = ("tests/", "testproject/", "benchmarks/", ".ci/", "dev", "tox.ini", "docs/_build/")
METADATA_NEEDS = (
    "License-Expression: BSD-3-Clause",
    "License-File: LICENSE",
    "Classifier: Operating System :: POSIX",
    "Classifier: Development Status :: ",
    "Project-URL: Documentation, ",
    "Project-URL: Changelog, ",
    "Requires-Dist: django-tasks>=0.11; extra == 'backport'",
)


def problems(dist: Path) -> list[str]:
    wheels, sdists = list(dist.glob("*.whl")), list(dist.glob("*.tar.gz"))
    if len(wheels) != 1 or len(sdists) != 1:
        return [f"expected one wheel and one sdist in {dist}, found {wheels + sdists}"]
    found = []
    with zipfile.ZipFile(wheels[0]) as wheel:
        names = wheel.namelist()
        metadata = wheel.read(next(n for n in names if n.endswith(".dist-info/METADATA"))).decode()
    found += [f"the wheel lacks {want}" for want in WHEEL_NEEDS if not any(n.startswith(want) for n in names)]
    headers = Parser().parsestr(metadata, headersonly=True)
    lines = [f"{key}: {value}" for key, value in headers.items()]
    found += [
        f"the metadata lacks {want!r}"
        for want in METADATA_NEEDS
        if not any(x.startswith(want) for x in lines)
    ]
    with tarfile.open(sdists[0]) as sdist:
        # Every member sits under the one top directory, name-version/.
        members = [m.split("/", 1)[1] for m in sdist.getnames() if "/" in m]
    found += [
        f"the sdist lacks {want}" for want in SDIST_NEEDS if not any(m.startswith(want) for m in members)
    ]
    found += [
        f"the sdist carries {member}"
        for member in members
        if any(member == bad or member.startswith(bad) for bad in SDIST_REFUSES) or "__pycache__" in member
    ]
    return found


if __name__ == "__main__":
    dist = Path(sys.argv[1] if len(sys.argv) > 1 else "dist")
    found = problems(dist)
    for problem in found:
        print(f"package: {problem}", file=sys.stderr)
    if not found:
        print(f"package: {', '.join(sorted(p.name for p in dist.iterdir()))} look right")
    sys.exit(1 if found else 0)
