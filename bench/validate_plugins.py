"""Static validation throughput: `covel validate-plugin` on the builtin plugins and the good
fixture packages, in-process, repeated; packages per second.

Writes bench/results/validate_plugins.json. Run: .venv/bin/python -m bench.validate_plugins
"""

from __future__ import annotations

import json
import platform
import statistics
import sys
import time
from pathlib import Path

from services.registry.package_validator import validate_package
from shared.settings import default_plugin_dirs

ROOT = Path(__file__).resolve().parent.parent
RESULTS = Path(__file__).parent / "results"
GOOD_FIXTURES = ROOT / "tests" / "registry" / "fixtures" / "good"
ROUNDS = 7
MIN_ROUND_S = 0.5


def package_folders() -> tuple[list[Path], list[Path]]:
    builtin = sorted(path for path in default_plugin_dirs()[0].iterdir() if (path / "PLUGIN.md").is_file())
    fixtures = sorted(path for path in GOOD_FIXTURES.iterdir() if (path / "PLUGIN.md").is_file()) if GOOD_FIXTURES.is_dir() else []
    return builtin, fixtures


def packages_per_second(folders: list[Path]) -> tuple[float, int]:
    """Median over ROUNDS of the rate of whole validations, each round at least MIN_ROUND_S long."""
    for folder in folders:  # warm imports and caches once
        report = validate_package(folder)
        if not report.ok:
            raise SystemExit(f"{folder} does not validate: {[str(d) for d in report.diagnostics]}")
    rates = []
    total = 0
    for _ in range(ROUNDS):
        count = 0
        start = time.perf_counter()
        while True:
            for folder in folders:
                validate_package(folder)
            count += len(folders)
            elapsed = time.perf_counter() - start
            if elapsed >= MIN_ROUND_S:
                break
        rates.append(count / elapsed)
        total += count
    return statistics.median(rates), total


def main() -> None:
    builtin, fixtures = package_folders()
    builtin_rate, builtin_runs = packages_per_second(builtin)
    all_rate, all_runs = packages_per_second(builtin + fixtures)
    result = {
        "builtin_packages": [path.name for path in builtin],
        "fixture_packages": [path.name for path in fixtures],
        "builtin_packages_per_second": round(builtin_rate, 1),
        "builtin_ms_per_package": round(1000 / builtin_rate, 3),
        "all_packages_per_second": round(all_rate, 1),
        "all_ms_per_package": round(1000 / all_rate, 3),
        "validations_run": builtin_runs + all_runs,
        "rounds": ROUNDS,
        "python": platform.python_version(),
        "machine": platform.machine(),
    }
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "validate_plugins.json").write_text(json.dumps(result, indent=2) + "\n")
    json.dump(result, sys.stdout, indent=2)
    print()


if __name__ == "__main__":
    main()
