"""Java and Maven: find the tools, fetch pinned artifacts into the cache, build classpaths.

Artifacts are fetched by coordinates with `mvn dependency:copy-dependencies` into
`<cache>/jvm/<name>/`, once: a marker file records the coordinates that were copied,
so a later call with the same pin does nothing and a changed pin fetches again.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import tempfile
from pathlib import Path

from harness.errors import EnvironmentProblem
from harness.paths import cache_dir
from harness.versions import JVM_ARTIFACTS

_MARKER = ".fetched"
# the JVM options of a Spark process that lives seconds on a small input (the check before start,
# the batch oracle of a small case): the client compiler alone (C2 compiles for longer than such a
# process lives, on the cores the case needs) and the serial collector
QUICK_JVM = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"


def quick_submit_args() -> str:
    """PYSPARK_SUBMIT_ARGS that start a pyspark process's JVM with QUICK_JVM."""
    return f"--driver-java-options '{QUICK_JVM}' pyspark-shell"
_POM = """<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>harness</groupId><artifactId>fetch-{name}</artifactId><version>0</version>
  <dependencies><dependency>
    <groupId>{group}</groupId><artifactId>{artifact}</artifactId><version>{version}</version>
  </dependency></dependencies>
</project>
"""


def require_tool(name: str, fix: str) -> str:
    """Return the path of executable `name`, or raise EnvironmentProblem naming the fix."""
    path = shutil.which(name)
    if path is None:
        raise EnvironmentProblem(f"`{name}` was not found on PATH", fix)
    return path


def java() -> str:
    return require_tool(
        "java", "install a JDK 17 or newer (Debian: apt-get install openjdk-17-jdk-headless)"
    )


def java_version() -> str:
    """The `java -version` string, e.g. '17.0.15'."""
    out = subprocess.run([java(), "-version"], capture_output=True, text=True).stderr
    match = re.search(r'version "([^"]+)"', out)
    return match.group(1) if match else out.strip().splitlines()[0]


def artifact_dir(name: str) -> Path:
    return cache_dir() / "jvm" / name


def is_fetched(name: str) -> bool:
    marker = artifact_dir(name) / _MARKER
    return marker.exists() and marker.read_text().strip() == JVM_ARTIFACTS[name]


def fetch(name: str, log=print) -> Path:
    """Copy artifact `name` and its runtime dependencies into the cache, when missing."""
    target = artifact_dir(name)
    if is_fetched(name):
        return target
    coords = JVM_ARTIFACTS[name]
    group, artifact, version = coords.split(":")
    mvn = require_tool("mvn", "install Maven (Debian: apt-get install maven)")
    java()
    log(f"fetching {coords} with mvn into {target}")
    if target.exists():
        shutil.rmtree(target)
    with tempfile.TemporaryDirectory() as tmp:
        pom = Path(tmp) / "pom.xml"
        pom.write_text(_POM.format(name=name, group=group, artifact=artifact, version=version))
        cmd = [mvn, "-B", "-q", "-f", str(pom), "dependency:copy-dependencies",
               f"-DoutputDirectory={target}", "-DincludeScope=runtime"]
        proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise EnvironmentProblem(
            f"mvn could not fetch {coords}:\n{(proc.stdout + proc.stderr)[-2000:]}",
            "check that Maven reaches its default repository, then run "
            "`python -m harness fetch-jvm` again",
        )
    (target / _MARKER).write_text(coords + "\n")
    return target


def fetch_all(log=print) -> dict[str, Path]:
    return {name: fetch(name, log) for name in JVM_ARTIFACTS}


def jars(name: str) -> list[Path]:
    """The fetched jars of artifact `name`; raise when they are not fetched."""
    if not is_fetched(name):
        raise EnvironmentProblem(
            f"the JVM artifact {JVM_ARTIFACTS[name]} is not in the cache ({artifact_dir(name)})",
            "run `python -m harness fetch-jvm` (tox runs it for you)",
        )
    return sorted(artifact_dir(name).glob("*.jar"))


def spark_connector_jars() -> list[Path]:
    """Spark's Kafka connector jars, minus those pyspark already ships (same artifact)."""
    return spark_extra_jars("spark-kafka")


def spark_extra_jars(name: str) -> list[Path]:
    """Artifact `name`'s jars for a Spark driver's classpath, minus the artifacts pyspark
    already ships (one copy of each: pyspark's, which Spark was built with)."""
    import pyspark

    bundled = {_artifact_name(p.name) for p in (Path(pyspark.__file__).parent / "jars").glob("*.jar")}
    return [p for p in jars(name) if _artifact_name(p.name) not in bundled]


def _artifact_name(jar_file: str) -> str:
    """'kafka-clients-3.9.1.jar' -> 'kafka-clients' (drop the version and suffix).

    The version is the first '-' + dotted number: the '-0-10' in
    'spark-sql-kafka-0-10_2.13-4.2.0.jar' belongs to the name."""
    return re.sub(r"-\d+(\.\d+)+.*\.jar$", "", jar_file)
