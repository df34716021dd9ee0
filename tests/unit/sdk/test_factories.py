"""The accelerator factories: generated from the catalog and in step with it, carrying its facts, and refusing
bad values with the API's own field errors."""

from __future__ import annotations

import inspect
import typing
from pathlib import Path

import pytest

import accelpool_sdk as ap
from accelpool_api.validation import validate_spec
from accelpool_core import catalog
from accelpool_sdk import factories, generate


def _factory(entry: catalog.Accelerator) -> typing.Any:
    vendor = getattr(ap.Accelerator, generate.VENDOR_CLASSES[entry.vendor][0])
    return getattr(vendor, generate.factory_name(entry.model))


def test_the_generated_module_is_what_the_catalog_makes() -> None:
    """`make sdk` is up to date: this is the staleness check of sdk/accelpool_sdk/factories.py."""
    assert Path(factories.__file__).read_text() == generate.render()


def test_a_catalog_change_makes_the_module_stale(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(catalog, "ACCELERATORS", catalog.ACCELERATORS[:-1])
    rendered = generate.render()
    assert "def TPU_v6e(" not in rendered
    assert rendered != Path(factories.__file__).read_text()


def test_each_vendor_has_a_factory_per_catalog_model_and_nothing_else() -> None:
    for vendor, (class_name, _) in generate.VENDOR_CLASSES.items():
        namespace = getattr(ap.Accelerator, class_name)
        assert namespace is getattr(ap, class_name)
        written = {name for name in vars(namespace) if not name.startswith("_")}
        assert written == {generate.factory_name(model) for model in generate.models(vendor)}, class_name


@pytest.mark.parametrize("entry", catalog.ACCELERATORS, ids=lambda e: e.name)
def test_every_catalog_entry_is_reachable_through_its_factory_with_its_facts(entry: catalog.Accelerator) -> None:
    factory = _factory(entry)
    parameters = inspect.signature(factory).parameters
    choices = {"memory": f"{entry.memory_gb}GB", "form_factor": entry.form_factor.value}
    made = factory(4, **{key: value for key, value in choices.items() if key in parameters})
    assert isinstance(made, ap.Accelerator)
    assert made.entry is entry
    assert (made.name, made.count, made.vendor, made.memory_gb) == (entry.name, 4, entry.vendor.value, entry.memory_gb)
    assert (made.peaks, made.bandwidth_gbps, made.resource) == (entry.peaks, entry.bandwidth_gbps, entry.resource)
    assert made.tflops("bf16") == entry.peaks.bf16
    assert made.mig_profiles == tuple(p.name for p in entry.mig_profiles)


def test_a_factorys_mig_literal_lists_its_models_profiles_and_only_mig_gpus_take_mig() -> None:
    assert typing.get_args(factories.H100Mig) == tuple(
        dict.fromkeys(p.name for e in catalog.find("H100") for p in e.mig_profiles)
    )
    assert "mig" in inspect.signature(ap.Accelerator.NVIDIA.A30).parameters
    assert "mig" not in inspect.signature(ap.Accelerator.NVIDIA.L4).parameters
    assert "mig" not in inspect.signature(ap.Accelerator.AMD.MI300X).parameters


def test_the_default_variant_is_the_one_the_models_name_resolves_to() -> None:
    assert ap.Accelerator.NVIDIA.H100().name == "H100-80GB"
    assert ap.Accelerator.NVIDIA.H100(form_factor="NVL").name == "H100-94GB-NVL"  # as Skyward's H100(form_factor=NVL)
    assert ap.Accelerator.NVIDIA.A100(memory="80GB", form_factor="PCIe").name == "A100-80GB-PCIE"
    assert ap.Accelerator.NVIDIA.A100().name == catalog.lookup("A100").name


def test_mig_is_the_pools_layout_per_gpu() -> None:
    made = ap.Accelerator.NVIDIA.H100(count=8, mig="3g.40gb")
    assert made.mig_layout == ("3g.40gb", "3g.40gb")
    assert made.mig_wire() == {"mig": {"profile": "3g.40gb"}}
    assert made.accelerator_wire() == {"name": "H100", "count": 8}
    assert str(made) == "H100-80GB x8 (MIG 3g.40gb, 3g.40gb)"
    mixed = ap.Accelerator.NVIDIA.A100(mig=["4g.20gb", "2g.10gb", "1g.5gb"])
    assert mixed.mig_layout == ("4g.20gb", "2g.10gb", "1g.5gb")
    assert mixed.mig_wire() == {"mig": {"profiles": ["4g.20gb", "2g.10gb", "1g.5gb"]}}


def test_the_literal_names_and_string_forms() -> None:
    assert "H100-80GB" in typing.get_args(ap.NvidiaName)
    assert typing.get_args(ap.AwsName) == ("Trainium", "Trainium2", "Inferentia2")
    assert ap.Accelerator.parse("h100:8").name == "H100-80GB"
    assert ap.Accelerator.parse("h100:8").count == 8
    assert ap.Accelerator.from_name("trn2", 16).name == "Trainium2"
    assert ap.Accelerator.NVIDIA.L4().with_count(2).count == 2


@pytest.mark.parametrize(
    ("make", "wire", "shown"),
    [
        (lambda: ap.Accelerator.NVIDIA.H100(count=0), {"accelerator": {"name": "H100", "count": 0}}, "count=0"),
        (
            lambda: ap.Accelerator.NVIDIA.H100(mig="1g.5gb"),  # type: ignore[arg-type]
            {"accelerator": {"name": "H100"}, "mig": {"profile": "1g.5gb"}},
            "mig='1g.5gb'",
        ),
        (
            lambda: ap.Accelerator.NVIDIA.H100(mig=["3g.40gb", "3g.40gb", "3g.40gb"]),
            {"accelerator": {"name": "H100"}, "mig": {"profiles": ["3g.40gb"] * 3}},
            "mig=['3g.40gb', '3g.40gb', '3g.40gb']",
        ),
        (
            lambda: ap.Accelerator.from_name("L4", mig="1g.5gb"),
            {"accelerator": {"name": "L4"}, "mig": {"profile": "1g.5gb"}},
            "L4(mig='1g.5gb')",
        ),
        (
            lambda: ap.Accelerator.from_name("H100", memory="40GB"),
            {"accelerator": {"name": "H100", "memory": "40GB"}},
            "H100(memory='40GB')",
        ),
    ],
)
def test_bad_values_fail_with_the_apis_own_field_errors(
    make: typing.Any, wire: dict[str, typing.Any], shown: str
) -> None:
    """The same problems `accelpool validate` and the API server report for the spec the call would make."""
    with pytest.raises(ap.InvalidSpecError) as raised:
        make()
    _, expected = validate_spec(wire)
    assert expected
    assert raised.value.problems == expected
    assert shown in str(raised.value)
    assert str(expected[0]) in str(raised.value)


def test_the_messages_name_the_field_the_value_and_what_is_valid() -> None:
    with pytest.raises(ap.InvalidSpecError) as raised:
        ap.Accelerator.NVIDIA.H100(count=0)
    assert str(raised.value) == (
        "Accelerator.NVIDIA.H100(count=0): spec.accelerator.count: Invalid value: 0: "
        "spec.accelerator.count in body should be greater than or equal to 1"
    )
    with pytest.raises(ap.InvalidSpecError) as raised:
        ap.Accelerator.NVIDIA.A100(memory="80GB", mig="3g.20gb")
    assert str(raised.value) == (
        "Accelerator.NVIDIA.A100(memory='80GB', mig='3g.20gb'): spec.mig.profile: Invalid value: \"3g.20gb\": "
        "mig profile 3g.20gb is not offered by A100-80GB; valid: 1g.10gb, 1g.10gb+me, 1g.20gb, 2g.20gb, 3g.40gb, "
        "4g.40gb, 7g.80gb"
    )
    with pytest.raises(ap.InvalidSpecError, match=r"with_count\(0\): spec.accelerator.count: Invalid value: 0"):
        ap.Accelerator.NVIDIA.L4().with_count(0)
    with pytest.raises(ap.InvalidSpecError, match="unknown accelerator 'H1000'; did you mean"):
        ap.Accelerator.parse("H1000:8")


def test_the_predicates_answer_for_an_accelerator_or_a_name() -> None:
    assert ap.is_nvidia(ap.Accelerator.NVIDIA.H100()) and ap.is_gpu(ap.NVIDIA.L4())
    assert ap.is_amd(ap.AMD.MI300X()) and ap.is_gpu("MI300X") and not ap.is_nvidia("MI300X")
    assert ap.is_trainium(ap.AWS.Trainium2()) and ap.is_trainium("trn2") and not ap.is_inferentia("trn2")
    assert ap.is_inferentia("inf2") and not ap.is_gpu("inf2")
    assert ap.is_tpu(ap.Google.TPU_v5p()) and ap.is_tpu("v6e") and not ap.is_trainium("v6e")
