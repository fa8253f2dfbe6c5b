"""spark_apps.contract is what the control plane and the data plane agree on (names, config, the gold
contract, leases, topic ownership): every module of it imports without pyspark, so an Airflow worker
or the serving API never needs Spark to read a name or a config."""

from __future__ import annotations

import pkgutil
import subprocess
import sys
from pathlib import Path

import spark_apps.contract

CONTRACT_DIR = Path(spark_apps.contract.__file__).parent
MODULES = sorted(f"spark_apps.contract.{m.name}" for m in pkgutil.iter_modules([str(CONTRACT_DIR)]))

# `sys.modules[name] = None` makes every import of `name` (or of a submodule) raise ImportError.
BLOCK_PYSPARK = "import sys; sys.modules['pyspark'] = None; sys.modules['py4j'] = None\n"


def test_the_contract_package_lists_its_modules() -> None:
    assert {"spark_apps.contract.naming", "spark_apps.contract.config", "spark_apps.contract.records"} <= set(
        MODULES
    )


def test_every_contract_module_imports_without_pyspark() -> None:
    imports = "".join(f"import {module}\n" for module in MODULES)
    check = "assert not [m for m in sys.modules if m.startswith(('pyspark.', 'py4j.'))]\n"
    result = subprocess.run(
        [sys.executable, "-c", BLOCK_PYSPARK + imports + check],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stderr[-2000:]


def test_blocking_pyspark_is_what_the_check_relies_on() -> None:
    result = subprocess.run(
        [sys.executable, "-c", BLOCK_PYSPARK + "import spark_apps.validation.schemas\n"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode != 0
    assert "pyspark" in result.stderr
