"""`accelpool catalog [NAME] [-o table|json]`: the accelerators accelpool knows, or one in detail."""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from typing import Any

import accelpool_api as api
from accelpool.cli.commands import SUMMARIES
from accelpool_core import catalog
from accelpool_core.textio import format_table


def register(subparsers: Any) -> None:
    parser: argparse.ArgumentParser = subparsers.add_parser("catalog", help=SUMMARIES["catalog"], description=__doc__)
    parser.add_argument("name", nargs="?", help="a name or alias, e.g. H100, a100-80gb, nvidia-l4")
    parser.add_argument("-o", "--output", choices=("table", "json"), default="table")
    parser.set_defaults(func=run)


def entry_json(entry: catalog.Accelerator) -> dict[str, Any]:
    """One catalog entry as JSON: names, hardware facts, detection labels and MIG table."""
    return {
        "name": entry.name,
        "model": entry.model,
        "vendor": entry.vendor.value,
        "aliases": list(entry.aliases),
        "memoryGB": entry.memory_gb,
        "formFactor": entry.form_factor.value,
        "resource": entry.resource,
        "peakTFLOPS": {k: v for k, v in dataclasses.asdict(entry.peaks).items() if v is not None},
        "bandwidthGBps": entry.bandwidth_gbps,
        "tdpWatts": entry.tdp_watts,
        "unitsPerPackage": entry.units_per_package,
        "training": entry.training,
        "computeCapability": entry.compute_capability_text,
        "migCapable": entry.mig_capable,
        "migComputeSlices": entry.mig_compute_slices,
        "migMemorySlices": entry.mig_memory_slices,
        "migProfiles": [
            {
                "name": p.name,
                "computeSlices": p.compute_slices,
                "memorySlices": p.memory_slices,
                "maxInstances": p.max_instances,
                "fillsGPU": api.max_instances_that_fit(entry, p),
                "resource": p.resource,
            }
            for p in entry.mig_profiles
        ],
        "detection": {
            "gfdProducts": list(entry.detection.gfd_products),
            "gkeAccelerators": list(entry.detection.gke_accelerators),
            "karpenterNames": list(entry.detection.karpenter_names),
            "amdProducts": list(entry.detection.amd_products),
            "instanceTypes": entry.detection.instance_types,
        },
        "source": entry.source,
    }


def _table(entries: list[catalog.Accelerator]) -> str:
    header = ("NAME", "VENDOR", "MEMORY", "FORM", "BF16/FP16 TFLOPS", "BANDWIDTH", "RESOURCE", "MIG")
    rows = [header]
    for e in entries:
        half = e.peaks.bf16 or e.peaks.fp16
        rows.append(
            (
                e.name,
                e.vendor.value,
                f"{e.memory_gb}GB",
                e.form_factor.value,
                f"{half:g}" if half else "-",
                f"{e.bandwidth_gbps:g} GB/s",
                e.resource,
                f"{len(e.mig_profiles)} profiles" if e.mig_capable else "-",
            )
        )
    return format_table(rows)


def _detail(entry: catalog.Accelerator) -> str:
    peaks = ", ".join(f"{k} {v:g}" for k, v in dataclasses.asdict(entry.peaks).items() if v is not None)
    lines = [
        f"{entry.name}  ({entry.vendor.value} {entry.model}, {entry.memory_gb}GB, {entry.form_factor.value})",
        f"  aliases:    {', '.join(entry.aliases) or '-'}",
        f"  resource:   {entry.resource}",
        *([f"  compute capability: {entry.compute_capability_text}"] if entry.compute_capability else []),
        f"  peak TFLOPS (dense): {peaks}",
        f"  bandwidth:  {entry.bandwidth_gbps:g} GB/s;  board power {entry.tdp_watts} W",
        *(
            [f"  unit:       one of {entry.units_per_package} per package (what {entry.resource} counts); per unit"]
            if entry.units_per_package > 1
            else []
        ),
        *(["  workloads:  inference only (no training or fine-tuning)"] if not entry.training else []),
        f"  source:     {entry.source}",
    ]
    if entry.mig_capable:
        compute, memory = entry.mig_compute_slices, entry.mig_memory_slices
        lines.append(f"  MIG profiles ({entry.mig_table}):  name  compute/{compute}  memory/{memory}  max  fills-a-GPU")
        for p in entry.mig_profiles:
            fills = api.max_instances_that_fit(entry, p)
            lines.append(f"    {p.name:<12} {p.compute_slices:>3} {p.memory_slices:>9} {p.max_instances:>5} {fills:>7}")
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    if args.name is None:
        entries = list(catalog.ACCELERATORS)
        if args.output == "json":
            print(json.dumps([entry_json(e) for e in entries], indent=2))
        else:
            print(_table(entries))
        return 0
    try:
        entry = catalog.lookup(args.name)
    except catalog.UnknownAcceleratorError as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    print(json.dumps(entry_json(entry), indent=2) if args.output == "json" else _detail(entry))
    return 0
