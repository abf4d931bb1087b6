"""The SparkApplication submits the file the standalone-cluster test submits.

tests/ops/test_rollup_standalone.py runs ``spark-submit --master spark://... ops/rollup/job.py`` on a
real master and two workers; the Spark operator runs ``spark-submit`` on the file named by
``mainApplicationFile``. Both must be the same file: the job module's own (its ``__main__`` is the
entry point), here in the source tree, there in the rollup image's virtual environment (the
directory above the image's ``SPARK_HOME``, which is the ``pyspark`` package). The component is read
directly (no kubectl needed), and every rendered overlay that has a SparkApplication too.
"""

from __future__ import annotations

from pathlib import PurePosixPath

import pytest
import yaml

from tests.k8s import dockerfile, manifests
from tests.k8s.manifests import Doc
from tests.ops.test_rollup_standalone import ROLLUP_APPLICATION, ROLLUP_MODULE

pytestmark = pytest.mark.k8s

COMPONENT = manifests.COMPONENTS_DIR / "rollup-spark-operator" / "sparkapplication.yaml"


def _module_file() -> PurePosixPath:
    """``ops/rollup/job.py``: where the submitted module lives inside site-packages."""
    return PurePosixPath(*ROLLUP_MODULE.split(".")).with_suffix(".py")


def _expected_main_application_file() -> str:
    site_packages = PurePosixPath(dockerfile.parse().stage("rollup").env()["SPARK_HOME"]).parent
    return f"local://{site_packages / _module_file()}"


def test_the_standalone_test_submits_the_job_modules_own_file() -> None:
    assert ROLLUP_MODULE == "ops.rollup.job"
    assert ROLLUP_APPLICATION.parts[-len(_module_file().parts) :] == _module_file().parts
    source = ROLLUP_APPLICATION.read_text(encoding="utf-8")
    assert 'if __name__ == "__main__":\n' in source, "spark-submit runs the file: it needs a __main__"


def test_the_component_submits_that_file() -> None:
    documents = [d for d in yaml.safe_load_all(COMPONENT.read_text(encoding="utf-8")) if d]
    (application,) = manifests.of_kind(documents, "SparkApplication")
    assert application["spec"]["type"] == "Python"
    assert application["spec"]["mainApplicationFile"] == _expected_main_application_file()


def test_every_rendered_spark_application_submits_that_file(rendered: dict[str, list[Doc]]) -> None:
    applications = [a for docs in rendered.values() for a in manifests.of_kind(docs, "SparkApplication")]
    assert applications, "no overlay renders the SparkApplication"
    for application in applications:
        assert application["spec"]["mainApplicationFile"] == _expected_main_application_file()
