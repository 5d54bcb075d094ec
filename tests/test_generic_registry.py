"""The one generic Registry[T] and the five registries built on it: the same rules everywhere."""

import sys
from dataclasses import dataclass

import pytest

from probekit.errors import ConfigError
from probekit.util.registry import Registry, qualified_name


def first():
    """A plug-in."""


def second():
    """Another plug-in with the name of the first."""


def test_register_get_names_and_the_one_rule_for_a_name_registered_twice():
    reg: Registry[object] = Registry("widget")
    assert reg.register("alpha", first) is first
    reg.register("beta", 2, origin=second)
    assert reg.get("alpha") is first and reg.names() == ("alpha", "beta") and "beta" in reg
    assert dict(reg.items()) == {"alpha": first, "beta": 2} and reg.values() == [first, 2]
    with pytest.raises(ConfigError) as err:
        reg.register("alpha", second)
    msg = str(err.value)
    assert f"widget 'alpha' is already registered by {qualified_name(first)}" in msg
    assert f"{qualified_name(second)} cannot register the same name" in msg
    assert reg.get("alpha") is first  # the refused entry changed nothing
    reg.register("alpha", first)  # the same definition again (a re-imported module): replaced
    with pytest.raises(ConfigError, match=r"widget name 'not an id' must be an identifier"):
        reg.register("not an id", first)


def test_unknown_name_lists_the_registered_ones_and_suggests_close_ones():
    reg: Registry[int] = Registry("widget", hint="register one with reg.register")
    for name in ("linear", "logistic", "ridge"):
        reg.register(name, 1, origin=f"{name}.origin")
    with pytest.raises(ConfigError, match=r"^unknown widget 'ridg' \(did you mean 'ridge'\?\); registered "
                       r"widgets are \['linear', 'logistic', 'ridge'\]; register one with reg.register$"):
        reg.get("ridg")
    with pytest.raises(ConfigError, match=r"^unknown widget 'svm'; registered widgets are"):
        reg.get("svm")
    with pytest.raises(ConfigError, match=r"unknown widget 3"):
        reg.get(3)


def test_plugins_are_imported_on_first_lookup_and_temporary_entries_end():
    import sys

    sys.modules.pop("probekit.similarity.measures.rsa", None)
    reg: Registry[int] = Registry("measure module", plugins="probekit.similarity.measures")
    assert "probekit.similarity.measures.rsa" not in sys.modules
    reg.names()
    assert "probekit.similarity.measures.rsa" in sys.modules
    with reg.temporary():
        reg.register("toy", 1)
        assert reg.get("toy") == 1
    assert "toy" not in reg
    with pytest.raises(KeyError):
        reg.unregister("toy")


@dataclass(frozen=True, kw_only=True)
class _Spec:
    x: int = 0


def _analysis_a(spec, ctx):
    return None


def _analysis_b(spec, ctx):
    return None


def _registrations():
    """``(registry, register(name, definition), lookup(name), two definitions)`` of each registry."""
    from probekit.executor import EXECUTORS, get_executor, register_executor
    from probekit.hypotheses.registry import MEASUREMENT_KINDS, get_kind, register_measurement
    from probekit.probes.kind import PROBE_KINDS, ProbeKind, probe_kind, register_probe_kind
    from probekit.similarity.measure import (
        SIMILARITY_MEASURES,
        SimilarityMeasure,
        register_similarity_measure,
        similarity_measure,
    )
    from probekit.suites.registry import ANALYSES, get_analysis, register_analysis

    def kind(cls_name):
        return type(cls_name, (ProbeKind,), {"name": "toy_twice", "metric": "m", "chance_text": "",
                                             "fit_batched": None, "score": None, "__module__": __name__})

    def measure(cls_name):
        return type(cls_name, (SimilarityMeasure,), {"name": "toy_twice", "label": None,
                                                     "pair_values": None, "__module__": __name__})

    return [
        ("analysis section", ANALYSES, lambda d: register_analysis("toy_twice", spec=_Spec)(d),
         get_analysis, (_analysis_a, _analysis_b)),
        ("measurement kind", MEASUREMENT_KINDS, lambda d: register_measurement("toy_twice", spec=_Spec)(d),
         get_kind, (_analysis_a, _analysis_b)),
        ("probe kind", PROBE_KINDS, register_probe_kind, probe_kind, (kind("KindA"), kind("KindB"))),
        ("similarity measure", SIMILARITY_MEASURES, register_similarity_measure, similarity_measure,
         (measure("MeasureA"), measure("MeasureB"))),
        ("executor", EXECUTORS, lambda d: register_executor("toy_twice", d), get_executor,
         (_analysis_a, _analysis_b)),
    ]


@pytest.mark.parametrize("index", range(5), ids=["analysis", "measurement", "probe_kind", "similarity", "executor"])
def test_every_registry_refuses_a_name_registered_twice_naming_both(index):
    what, registry, register, lookup, (a, b) = _registrations()[index]
    with registry.temporary():
        register(a)
        register(a)  # the same definition again is no conflict
        with pytest.raises(ConfigError) as err:
            register(b)
        msg = str(err.value)
        assert msg.startswith(f"{what} 'toy_twice' is already registered by {qualified_name(a)}; ")
        assert f"{qualified_name(b)} cannot register the same name" in msg
        with pytest.raises(ConfigError, match=rf"unknown {what} 'toy_twic' \(did you mean 'toy_twice'\?\); "
                           rf"registered {what}s are \[.*'toy_twice'.*\]"):
            lookup("toy_twic")
    assert "toy_twice" not in registry


def test_temporary_on_a_registry_whose_plugins_are_not_loaded_yet_keeps_them(tmp_path, monkeypatch):
    (tmp_path / "toy_reg_mod.py").write_text(
        "from probekit.util.registry import Registry\nREG = Registry('toy', plugins='toy_reg_plugins')\n")
    (tmp_path / "toy_reg_plugins").mkdir()
    (tmp_path / "toy_reg_plugins" / "__init__.py").write_text("")
    (tmp_path / "toy_reg_plugins" / "a.py").write_text("from toy_reg_mod import REG\nREG.register('a', 1)\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    import toy_reg_mod

    try:
        with toy_reg_mod.REG.temporary():   # the plug-ins load here, before the snapshot
            toy_reg_mod.REG.register("b", 2)
        assert toy_reg_mod.REG.names() == ("a",)
    finally:
        for name in ("toy_reg_mod", "toy_reg_plugins", "toy_reg_plugins.a"):
            sys.modules.pop(name, None)


def test_a_registry_reads_like_a_mapping_and_data_registries_relax_names():
    class Missing(ConfigError):
        """An unknown name of this registry."""

    reg: Registry[int] = Registry("model", identifiers=False, error=Missing)
    reg["smollm2-135m"] = 1                          # register(name, obj)
    reg.register("gemma3-270m", 2)
    assert reg["gemma3-270m"] == 2 and list(reg) == ["gemma3-270m", "smollm2-135m"] and len(reg) == 2
    assert {**reg} == {"gemma3-270m": 2, "smollm2-135m": 1} and reg.get("nope", 0) == 0
    with pytest.raises(Missing, match=r"^unknown model 'smollm2' \(did you mean 'smollm2-135m'\?\); "
                       r"registered models are \['gemma3-270m', 'smollm2-135m'\]$"):
        reg["smollm2"]
    with pytest.raises(ConfigError, match=r"model name 'a b' must be a non-empty name without whitespace"):
        reg.register("a b", 3)
    del reg["gemma3-270m"]
    assert reg.names() == ("smollm2-135m",)


def test_the_name_tables_are_registries_with_the_close_match_error():
    from probekit.models.named import REGISTRY, UnknownModelError, get_spec
    from probekit.testbeds.modular import ModularAddition, ModularAdditionConfig
    from probekit.testbeds.registry import TASKS, TaskType, config_class, get_task
    from probekit.train.training_preset import PRESETS, TrainingPreset

    for table in (REGISTRY, TASKS, PRESETS):
        assert isinstance(table, Registry)
    assert TASKS["modular_addition"] == TaskType(ModularAddition, ModularAdditionConfig)
    assert config_class("scan").__name__ == "ScanConfig"
    with pytest.raises(ConfigError, match=r"^unknown task 'scna' \(did you mean 'scan'\?\)"):
        get_task("scna")
    with pytest.raises(UnknownModelError, match=r"did you mean 'gemma3-270m'\?"):
        get_spec("gemma3")
    with pytest.raises(KeyError):  # UnknownModelError is a KeyError too (older callers)
        get_spec("gemma3")
    assert all(isinstance(p, TrainingPreset) for p in PRESETS.values())
    assert {n for n, p in PRESETS.items() if p.pretrained} == {
        "smollm2_finetune", "smollm2_bio_smoke", "smollm2_bio"}


_ENTRY_POINT_PLUGINS = {
    "analysis": ("from dataclasses import dataclass\n"
                 "from probekit.suites.registry import register_analysis\n\n"
                 "@dataclass(frozen=True, kw_only=True)\nclass EpSpec:\n    x: int = 0\n\n"
                 "@register_analysis('ep_toy', spec=EpSpec)\ndef run(spec, ctx):\n    return None\n"),
    "probe_kind": ("from probekit.probes.kind import ProbeKind, register_probe_kind\n\n"
                   "@register_probe_kind\nclass EpToy(ProbeKind):\n    name = 'ep_toy'\n"
                   "    metric = 'm'\n    chance_text = ''\n    fit_batched = None\n    score = None\n"),
}


@pytest.mark.parametrize("which", ["analysis", "probe_kind"])
def test_analyses_and_probe_kinds_load_installed_entry_points_lazily(which, tmp_path, monkeypatch):
    """The measurement kinds' entry-point mechanism: lazy, a broken plug-in recorded, SystemExit caught."""
    import importlib.metadata as md

    from probekit.probes.kind import PROBE_KINDS, probe_kind
    from probekit.suites.registry import ANALYSES, get_analysis

    registry, lookup, builtin, group = {
        "analysis": (ANALYSES, get_analysis, "probe", "probekit.analyses"),
        "probe_kind": (PROBE_KINDS, probe_kind, "ridge", "probekit.probe_kinds"),
    }[which]
    module = f"ep_{which}_plugin"
    (tmp_path / f"{module}.py").write_text(_ENTRY_POINT_PLUGINS[which])
    (tmp_path / f"ep_{which}_exits.py").write_text("raise SystemExit(3)\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    eps = [md.EntryPoint(name="a_broken", value="no_such_ep_pkg", group=group),
           md.EntryPoint(name="b_exits", value=f"ep_{which}_exits", group=group),
           md.EntryPoint(name="ep_toy", value=module, group=group)]
    monkeypatch.setattr(md, "entry_points", lambda group=None: list(eps) if group == registry.group else [])
    registry.rescan()
    try:
        with registry.temporary():
            assert lookup(builtin) is registry.get(builtin) and module not in sys.modules
            assert lookup("ep_toy") is registry.get("ep_toy") and module in sys.modules
            assert registry.broken() == ()            # the entry point of that name went first
            with pytest.raises(ConfigError) as err:
                lookup("ep_toy_unknown")
            missing = ("plug-in module 'no_such_ep_pkg' (from entry point 'a_broken' in group "
                       f"'{group}'): ModuleNotFoundError: No module named 'no_such_ep_pkg'")
            exits = "SystemExit: the plug-in called sys.exit(3) (a plug-in must not exit)"
            (first, second) = registry.broken()
            assert first == missing and second.endswith(exits) and "\n" not in str(err.value)
            assert str(err.value).endswith(f"; installed plug-ins that failed to import: {first} | {second}")
            assert lookup(builtin) is registry.get(builtin)   # still answered
    finally:
        for name in (module, f"ep_{which}_exits"):
            sys.modules.pop(name, None)
        monkeypatch.undo()
        registry.rescan()
    assert "ep_toy" not in registry and registry.broken() == ()
