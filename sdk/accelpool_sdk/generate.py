"""Writes `accelpool_sdk/factories.py` from the catalog: one typed factory per model, by vendor.

    python -m accelpool_sdk.generate --output sdk/accelpool_sdk/factories.py  # make sdk
    python -m accelpool_sdk.generate --check sdk/accelpool_sdk/factories.py   # make check-generated

Static autocompletion (IDEs, mypy) needs the names written out, so the factories are generated
rather than built at import time, as the CRD is generated from the models: the catalog stays the
one list, and tests/unit/sdk/test_factories.py fails when the file and the catalog disagree.

Each model of a vendor (`H100`, covering H100-80GB, H100-80GB-PCIE and H100-94GB-NVL) gets a
factory whose parameters are only what varies: `count` always; `memory` and `form_factor` as
Literal types where the model comes in several; `mig` as a Literal of the model's MIG profiles
where it has MIG. Its docstring lists each variant's facts. The default variant is the one the
model's name resolves to in the catalog.

Pure text generation; `main` is the command.
"""

from __future__ import annotations

import argparse
import keyword
import sys
import textwrap
from collections.abc import Iterable
from pathlib import Path

from accelpool_core import catalog

VENDOR_CLASSES: dict[catalog.Vendor, tuple[str, str]] = {
    catalog.Vendor.NVIDIA: ("NVIDIA", "Nvidia"),
    catalog.Vendor.AMD: ("AMD", "Amd"),
    catalog.Vendor.AWS: ("AWS", "Aws"),
    catalog.Vendor.GOOGLE: ("Google", "Google"),
}
"""Each catalog vendor → (its factory class, as Skyward names them; the prefix of its Literal name type)."""
LINE = 120
INDENT = "    "


def factory_name(model: str) -> str:
    """A model's factory: `TPU-v5p` → `TPU_v5p`; a name Python cannot take fails here, not in the file."""
    name = model.replace("-", "_").replace(".", "_")
    if not name.isidentifier() or keyword.iskeyword(name):
        raise ValueError(f"catalog model {model!r} makes no Python name ({name!r}): extend factory_name")
    return name


def models(vendor: catalog.Vendor) -> dict[str, list[catalog.Accelerator]]:
    """A vendor's models in catalog order, each with its entries, the model's default first."""
    found: dict[str, list[catalog.Accelerator]] = {}
    for entry in catalog.ACCELERATORS:
        if entry.vendor is vendor:
            found.setdefault(entry.model, []).append(entry)
    for model, entries in found.items():
        default = catalog.lookup(model)
        if default.model != model:
            raise ValueError(f"catalog model {model!r} resolves to {default.name}, another model")
        entries.sort(key=lambda e: e is not default)
    return found


def render() -> str:
    """The whole module's text."""
    vendors = [v for v in catalog.Vendor if any(e.vendor is v for e in catalog.ACCELERATORS)]
    unknown = [v for v in vendors if v not in VENDOR_CLASSES]
    if unknown:
        raise ValueError(f"catalog vendor {unknown[0].value!r} has no factory class: add it to VENDOR_CLASSES")
    parts = [_HEADER]
    names = []
    for vendor in vendors:
        type_name = f"{VENDOR_CLASSES[vendor][1]}Name"
        names.append(type_name)
        entry_names = [e.name for e in catalog.ACCELERATORS if e.vendor is vendor]
        doc = f"The catalog names of {VENDOR_CLASSES[vendor][0]}'s devices."
        parts.append(_alias(type_name, _literal(entry_names), doc))
    parts.append(_alias("AcceleratorName", " | ".join(names), "Every catalog name (aliases are accepted too)."))
    for vendor in vendors:
        for model, entries in models(vendor).items():
            profiles = _unique(p.name for e in entries for p in e.mig_profiles)
            if profiles:
                parts.append(_alias(f"{factory_name(model)}Mig", _literal(profiles), f"{model}'s MIG profiles."))
    classes = [*(_vendor_class(vendor) for vendor in vendors), _accelerator_class(vendors)]
    return "\n\n".join(parts) + "\n\n\n" + "\n\n\n".join(classes) + "\n"


_HEADER = '''"""Accelerator factories, one per model of accelpool's catalog, by vendor; and the catalog's names.

GENERATED from `accelpool_core.catalog` by `make sdk` (python -m accelpool_sdk.generate): do not edit.
tests/unit/sdk/test_factories.py fails when this file and the catalog disagree.

    Accelerator.NVIDIA.H100(count=8, mig="3g.40gb")   # a factory: validated, carries the catalog's facts
    NVIDIA.A100                                       # the factory itself: ComputePool calls it

Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal, TypeAlias

from accelpool_sdk.accelerator import CatalogAccelerator'''


def _alias(name: str, value: str, doc: str) -> str:
    return f'{name}: TypeAlias = {value}\n"""{doc}"""'


def _literal(values: Iterable[str], indent: str = "") -> str:
    quoted = [f'"{v}"' for v in values]
    one_line = f"Literal[{', '.join(quoted)}]"
    if len(indent) + len(one_line) + 30 <= LINE:
        return one_line
    inner = "".join(f"{indent}{INDENT}{q},\n" for q in quoted)
    return f"Literal[\n{inner}{indent}]"


def _unique(values: Iterable[str]) -> list[str]:
    return list(dict.fromkeys(values))


def _vendor_class(vendor: catalog.Vendor) -> str:
    class_name = VENDOR_CLASSES[vendor][0]
    resources = ", ".join(_unique(e.resource for e in catalog.ACCELERATORS if e.vendor is vendor))
    lines = [
        f"class {class_name}:",
        f'{INDENT}"""{class_name}\'s accelerators in the catalog (requested as {resources}): one factory per model."""',
    ]
    for model, entries in models(vendor).items():
        lines += ["", *_factory(model, entries)]
    return "\n".join(lines)


def _factory(model: str, entries: list[catalog.Accelerator]) -> list[str]:
    name = factory_name(model)
    memories = _unique(f"{e.memory_gb}GB" for e in entries)
    form_factors = _unique(e.form_factor.value for e in entries)
    mig = any(e.mig_profiles for e in entries)
    keywords: list[tuple[str, str]] = []
    if len(memories) > 1:
        keywords.append(("memory", _literal(memories)))
    if len(form_factors) > 1:
        keywords.append(("form_factor", _literal(form_factors)))
    if mig:
        keywords.append(("mig", f"{name}Mig | Sequence[{name}Mig]"))
    call = f'"{model}", count, ' + ", ".join(f"{k}={k}" for k, _ in keywords)
    call = call.rstrip(", ") + f', call="Accelerator.{_vendor_of(entries)}.{name}"'
    signature = [f"{INDENT}@staticmethod"]
    if keywords:
        params = "".join(f"{INDENT * 2}{k}: {t} | None = None,\n" for k, t in keywords)
        head = f"{INDENT}def {name}(\n{INDENT * 2}count: int | None = None,\n{INDENT * 2}*,\n"
        signature.append(f"{head}{params}{INDENT}) -> Accelerator:")
    else:
        signature.append(f"{INDENT}def {name}(count: int | None = None) -> Accelerator:")
    body = f"{INDENT * 2}return Accelerator.from_name({call})"
    if len(body) > LINE:
        body = f"{INDENT * 2}return Accelerator.from_name(\n{INDENT * 3}{call}\n{INDENT * 2})"
    return [*signature, *_docstring(model, entries), body]


def _vendor_of(entries: list[catalog.Accelerator]) -> str:
    return VENDOR_CLASSES[entries[0].vendor][0]


def _docstring(model: str, entries: list[catalog.Accelerator]) -> list[str]:
    """The variants' facts, one paragraph each, wrapped to the line length."""
    indent = INDENT * 2
    width = LINE - len(indent)
    head = f'{indent}"""{model}: `count` devices per node (None: any).'
    lines = [head, ""]
    for index, entry in enumerate(entries):
        peaks = ", ".join(f"{d.value} {v:g}" for d in catalog.Dtype if (v := entry.peaks.get(d)) is not None)
        text = (
            f"{entry.name}{' (default)' if index == 0 and len(entries) > 1 else ''}: {entry.memory_gb} GB "
            f"{entry.form_factor.value}, peak TFLOPS {peaks}; {entry.bandwidth_gbps:g} GB/s; {entry.tdp_watts} W"
        )
        if entry.mig_profiles:
            text += f"; MIG ({entry.mig_table}): {', '.join(p.name for p in entry.mig_profiles)}"
        lines += textwrap.wrap(text, width, initial_indent=indent, subsequent_indent=indent + INDENT)
    lines.append(f'{indent}"""')
    return lines


def _accelerator_class(vendors: list[catalog.Vendor]) -> str:
    lines = [
        "class Accelerator(CatalogAccelerator):",
        f'{INDENT}"""An accelerator of the catalog (`CatalogAccelerator`), with a factory per model under its vendor:',
        f"{INDENT}`Accelerator.NVIDIA.H100(count=8)`, `Accelerator.AMD.MI300X()`, `Accelerator.AWS.Trainium2(16)`.",
        f'{INDENT}"""',
        "",
    ]
    lines += [f"{INDENT}{VENDOR_CLASSES[v][0]} = {VENDOR_CLASSES[v][0]}" for v in vendors]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m accelpool_sdk.generate", description=__doc__.splitlines()[0])
    parser.add_argument("--output", metavar="FILE", type=Path, help="write FILE (default: standard output)")
    parser.add_argument("--check", metavar="FILE", type=Path, help="exit 1 when FILE is not what would be written")
    args = parser.parse_args(argv)
    text = render()  # before FILE is written: importing this package imports it
    if args.check is not None:
        if args.check.read_text() != text:
            print(f"{args.check} is stale: run 'make sdk'", file=sys.stderr)
            return 1
        return 0
    if args.output is not None:
        args.output.write_text(text)
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
