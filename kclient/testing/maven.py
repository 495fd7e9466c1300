"""Java and the JVM jars kclient's tests run beside it: Apache Kafka's broker,
clients and tools, ZooKeeper's server and Spark's own Kafka connector.

Each *jar set* is a small Maven project shipped with kclient
(``kclient/testing/jvm/<set>/pom.xml``, pinned versions). `jars` copies a
set's artifacts and their runtime dependencies from Maven Central into a
cache with ``mvn dependency:copy-dependencies`` the first time it is asked
for, and again whenever its pom changes. The cache is
``$KCLIENT_JVM_CACHE``, else ``$XDG_CACHE_HOME/kclient/jvm``
(``~/.cache/kclient/jvm``); a checkout's Makefile points it at the
ignored ``.cache/jvm/``. Where ``mvn`` is not on ``PATH`` (nor in
``$MAVEN_HOME``), Apache Maven's own binary distribution is fetched from
Maven Central into the cache first and its SHA-512 checked.

From a shell: ``python -m kclient.testing.maven`` fetches every set (or
the ones named) and prints where they are; ``--check-java`` prints one
line and exits 1 when Java 17+ is missing.
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import hashlib
import logging
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import urllib.request
from collections.abc import Iterator, Sequence
from pathlib import Path

__all__ = [
    "JAR_SETS",
    "JavaUnavailableError",
    "MAVEN_CENTRAL",
    "MINIMUM_JAVA",
    "JarFetchError",
    "cache_dir",
    "find_java",
    "jars",
    "java_major_version",
    "java_unavailable_reason",
    "main",
    "require_java",
]

log = logging.getLogger("kclient.testing")

#: The Maven repository the jars and (when needed) Maven itself come from.
MAVEN_CENTRAL = "https://repo.maven.apache.org/maven2"
#: Kafka 4's broker and Spark 4 both need Java 17 or newer.
MINIMUM_JAVA = 17
#: The Apache Maven release fetched when ``mvn`` is not installed.
MAVEN_VERSION = "3.9.9"

_POMS = Path(__file__).with_name("jvm")
#: The jar sets, by name: ``kafka-4`` (Apache Kafka 4.x, KRaft), ``kafka-3.9``
#: (the last ZooKeeper-mode release), ``zookeeper`` (ZooKeeper's server) and
#: ``spark-kafka`` (Spark's ``spark-sql-kafka-0-10`` connector).
JAR_SETS: tuple[str, ...] = tuple(sorted(p.parent.name for p in _POMS.glob("*/pom.xml")))

_JAVA_INSTALL_HINT = (
    "install a JDK or JRE 17+ (Debian/Ubuntu: apt-get install openjdk-17-jre-headless; "
    "macOS: brew install openjdk@17) or set JAVA_HOME to one"
)


class JavaUnavailableError(RuntimeError):
    """Java 17+ is not installed (the message says what was found and how
    to get it)."""


class JarFetchError(RuntimeError):
    """Maven could not fetch a jar set (the message holds Maven's output)."""


# ---------------------------------------------------------------- Java


def find_java() -> str | None:
    """The ``java`` executable: ``$JAVA_HOME/bin/java``, else ``java`` on
    ``PATH``.

    Returns:
        Its path, or None when there is none.
    """
    home = os.environ.get("JAVA_HOME")
    if home and os.access(os.path.join(home, "bin", "java"), os.X_OK):
        return os.path.join(home, "bin", "java")
    return shutil.which("java")


_VERSION = re.compile(r'version "(?P<major>\d+)(?:\.(?P<minor>\d+))?')


def java_major_version(java: str | None = None) -> int | None:
    """The major version of a Java runtime (``17`` for ``17.0.15``, ``8``
    for ``1.8.0_402``).

    Args:
        java: The executable; default `find_java`.

    Returns:
        The major version, or None when there is no Java or it would not
        say.
    """
    java = java or find_java()
    if java is None:
        return None
    try:
        out = subprocess.run([java, "-version"], capture_output=True, text=True, timeout=60).stderr
    except (OSError, subprocess.SubprocessError):
        return None
    match = _VERSION.search(out)
    if match is None:
        return None
    major = int(match["major"])
    if major == 1 and match["minor"]:
        major = int(match["minor"])
    return major


def java_unavailable_reason() -> str | None:
    """Why the JVM parts (Kafka, ZooKeeper, Spark) cannot run here.

    Returns:
        One line naming what is missing and how to get it, or None when
        Java 17+ is installed.
    """
    java = find_java()
    if java is None:
        return f"Java {MINIMUM_JAVA}+ is not installed (no JAVA_HOME, no java on PATH): {_JAVA_INSTALL_HINT}"
    major = java_major_version(java)
    if major is None:
        return f"{java} did not report its version: {_JAVA_INSTALL_HINT}"
    if major < MINIMUM_JAVA:
        return f"{java} is Java {major}; Kafka 4 and Spark 4 need Java {MINIMUM_JAVA}+: {_JAVA_INSTALL_HINT}"
    return None


def require_java() -> str:
    """The ``java`` executable, checked to be Java 17+.

    Returns:
        Its path.

    Raises:
        JavaUnavailableError: There is none, or it is older than 17.
    """
    reason = java_unavailable_reason()
    if reason is not None:
        raise JavaUnavailableError(reason)
    java = find_java()
    assert java is not None
    return java


# ---------------------------------------------------------------- the cache


def cache_dir() -> Path:
    """Where jar sets (and a fetched Maven) are kept.

    Returns:
        ``$KCLIENT_JVM_CACHE``, else ``$XDG_CACHE_HOME/kclient/jvm``, else
        ``~/.cache/kclient/jvm`` (not created here).
    """
    explicit = os.environ.get("KCLIENT_JVM_CACHE")
    if explicit:
        return Path(explicit).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "kclient" / "jvm"


def _pom(name: str) -> Path:
    pom = _POMS / name / "pom.xml"
    if not pom.is_file():
        raise ValueError(f"unknown jar set {name!r}; the sets are {', '.join(JAR_SETS)}")
    return pom


def _stamp(pom: Path) -> str:
    return hashlib.sha256(pom.read_bytes()).hexdigest()


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    """An exclusive lock (``flock``) on ``path``, so two processes never
    fetch into the cache at once."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a+b") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _maven(cache: Path) -> str:
    """``mvn`` on ``PATH`` or in ``$MAVEN_HOME``, else Apache Maven's
    binary distribution fetched from Maven Central into the cache."""
    home = os.environ.get("MAVEN_HOME")
    if home and os.access(os.path.join(home, "bin", "mvn"), os.X_OK):
        return os.path.join(home, "bin", "mvn")
    found = shutil.which("mvn")
    if found:
        return found
    target = cache / f"apache-maven-{MAVEN_VERSION}"
    mvn = target / "bin" / "mvn"
    if mvn.is_file():
        return str(mvn)
    url = f"{MAVEN_CENTRAL}/org/apache/maven/apache-maven/{MAVEN_VERSION}/apache-maven-{MAVEN_VERSION}-bin.tar.gz"
    log.warning("mvn is not installed: fetching Apache Maven %s from %s", MAVEN_VERSION, url)
    with tempfile.TemporaryDirectory(dir=cache) as tmp:
        archive = Path(tmp) / "maven.tar.gz"
        try:
            with urllib.request.urlopen(url, timeout=120) as response, open(archive, "wb") as out:
                shutil.copyfileobj(response, out)
            with urllib.request.urlopen(url + ".sha512", timeout=60) as response:
                expected = response.read().decode("ascii").split()[0].strip().lower()
        except OSError as exc:
            raise JarFetchError(f"mvn is not installed and Apache Maven could not be fetched from {url}: {exc}") from exc
        actual = hashlib.sha512(archive.read_bytes()).hexdigest()
        if actual != expected:
            raise JarFetchError(f"Apache Maven from {url}: SHA-512 {actual} does not match the published {expected}")
        with tarfile.open(archive) as tar:
            tar.extractall(tmp, filter="data")
        shutil.rmtree(target, ignore_errors=True)
        os.replace(Path(tmp) / f"apache-maven-{MAVEN_VERSION}", target)
    return str(mvn)


def jars(name: str, *, fetch: bool = True) -> list[str]:
    """The jars of one jar set, fetched first when the cache lacks them.

    Args:
        name: One of `JAR_SETS`.
        fetch: Run Maven when the set is missing or its pom changed; with
            False, raise instead.

    Returns:
        Absolute paths of every jar of the set, sorted by file name.

    Raises:
        ValueError: ``name`` is not a jar set.
        JavaUnavailableError: Java 17+ is missing (Maven needs it too).
        JarFetchError: The set is not cached and ``fetch`` is False, or
            Maven failed (the message holds its output's tail).
    """
    pom = _pom(name)
    cache = cache_dir()
    target = cache / name
    marker = target / ".kclient-pom-sha256"
    stamp = _stamp(pom)
    if marker.is_file() and marker.read_text().strip() == stamp:
        return sorted(str(p) for p in target.glob("*.jar"))
    if not fetch:
        raise JarFetchError(f"the {name} jars are not in {cache} (run: python -m kclient.testing.maven {name})")
    with _locked(cache / ".lock"):
        if marker.is_file() and marker.read_text().strip() == stamp:
            return sorted(str(p) for p in target.glob("*.jar"))
        java = require_java()
        mvn = _maven(cache)
        staging = Path(tempfile.mkdtemp(prefix=f".{name}-", dir=cache))
        env = dict(os.environ)
        env.setdefault("JAVA_HOME", str(Path(os.path.realpath(java)).parent.parent))
        command = [
            mvn,
            "--batch-mode",
            "--quiet",
            "--file",
            str(pom),
            "dependency:copy-dependencies",
            "-DincludeScope=runtime",
            f"-DoutputDirectory={staging}",
        ]
        log.warning("fetching the %s jars from Maven Central into %s", name, target)
        result = subprocess.run(command, capture_output=True, text=True, env=env, cwd=cache)
        if result.returncode != 0:
            shutil.rmtree(staging, ignore_errors=True)
            output = (result.stdout + result.stderr).strip().splitlines()
            raise JarFetchError(f"mvn could not fetch the {name} jars ({pom}):\n" + "\n".join(output[-30:]))
        (staging / marker.name).write_text(stamp + "\n")
        shutil.rmtree(target, ignore_errors=True)
        os.replace(staging, target)
    return sorted(str(p) for p in target.glob("*.jar"))


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m kclient.testing.maven [--check-java] [SET ...]``.

    Returns:
        0, or 1 with one line on stderr when Java 17+ is missing or Maven
        failed.
    """
    parser = argparse.ArgumentParser(
        prog="python -m kclient.testing.maven",
        description="Fetch the JVM jar sets kclient's tests use (Apache Kafka, ZooKeeper, Spark's Kafka connector) into the jar cache.",
    )
    parser.add_argument("sets", nargs="*", metavar="SET", help=f"default: all of {', '.join(JAR_SETS)}")
    parser.add_argument("--check-java", action="store_true", help="only check that Java 17+ is installed")
    args = parser.parse_args(argv)
    unknown = [name for name in args.sets if name not in JAR_SETS]
    if unknown:
        parser.error(f"unknown jar set {unknown[0]!r}; the sets are {', '.join(JAR_SETS)}")
    reason = java_unavailable_reason()
    if reason is not None:
        print(reason, file=sys.stderr)
        return 1
    if args.check_java:
        return 0
    logging.basicConfig(level=logging.WARNING, format="%(message)s")
    for name in args.sets or JAR_SETS:
        try:
            found = jars(name)
        except (JarFetchError, JavaUnavailableError) as exc:
            print(exc, file=sys.stderr)
            return 1
        print(f"{name}: {len(found)} jars in {cache_dir() / name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
