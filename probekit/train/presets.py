"""Named run presets: task overrides + model overrides + :class:`TrainConfig` for each testbed.

Every task name is a preset (its CPU default); ``*_paper`` / ``*_gpu`` presets document the
published or scaled-up GPU configurations. A :class:`Preset` is a
:class:`~probekit.train.training_preset.TrainingPreset` trained from scratch, registered in
:data:`~probekit.train.training_preset.PRESETS` with the fine-tune presets. The ``--set`` items
are parsed by :func:`probekit.train.sets.parse_sets` over :func:`run_sections`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

from ..errors import ConfigError, ProbekitError
from ..models.config import ModelConfig
from ..util.constraints import ConstraintError
from .config import TrainConfig
from .history import History
from .sets import parse_sets
from .training_preset import PRESETS

if TYPE_CHECKING:
    from ..testbeds.base import Task

__all__ = ["PRESETS", "Preset", "get_preset", "run_sections"]


def run_sections(task_name: str) -> dict[str, type]:
    """The ``--set`` sections of a testbed preset: its task's config, ``ModelConfig``, ``TrainConfig``."""
    from ..testbeds.registry import config_class  # lazy: the testbeds import torch

    return {"task": config_class(task_name), "model": ModelConfig, "train": TrainConfig}


@dataclass(frozen=True, kw_only=True)
class Preset:
    """``task``: name for :func:`probekit.testbeds.get_task`; overrides for task/model config."""

    task: str
    task_overrides: dict[str, Any] = field(default_factory=dict)
    model_overrides: dict[str, Any] = field(default_factory=dict)
    train: TrainConfig = field(default_factory=TrainConfig)
    description: str = ""
    pretrained: ClassVar[bool] = False

    def build(
        self, name: str, *, steps: int | None = None, seed: int | None = None,
        sets: Sequence[str] | None = None, device: str | None = None,
    ) -> tuple[Task, ModelConfig, TrainConfig]:
        """This preset (called ``name``) plus overrides -> (task, model config, train config).

        ``seed`` seeds the task data, the model initialisation and the batch order.

        Raises:
            ConfigError: an unknown key or a refused value, naming the ``--set`` item.
        """
        from ..testbeds.registry import get_task  # lazy: the testbeds import torch

        items = list(sets or [])
        over = parse_sets(items, run_sections(self.task), what=f"preset {name!r}")
        task_kw = {**self.task_overrides, **over["task"]}
        model_kw = {**self.model_overrides, **over["model"]}
        train_kw = {**self.train.to_dict(), **over["train"]}
        if seed is not None:
            task_kw["seed"] = model_kw["seed"] = train_kw["seed"] = seed
        if steps is not None:
            train_kw["steps"] = steps
        if device is not None:
            train_kw["device"] = device
        try:
            task = get_task(self.task, **task_kw)
            return task, task.model_config(**model_kw), TrainConfig.from_dict(train_kw)
        except ConstraintError as err:  # a field's declared rule: name the --set item that gave it
            raise ConfigError(_with_flag(str(err), items, err.key)) from None
        except ProbekitError as err:
            raise ConfigError(_with_flag(str(err), items)) from None
        except (ValueError, TypeError) as err:  # a task config's rule across fields (plain ValueError)
            raise ConfigError(_with_flag(str(err), items)) from None

    def planned_steps(
        self, name: str, *, steps: int | None = None, seed: int | None = None,
        sets: Sequence[str] | None = None, device: str | None = None,
    ) -> int:
        """The final step of a run with these overrides (validated; nothing trains)."""
        return self.build(name, steps=steps, seed=seed, sets=sets, device=device)[2].steps

    def train_run(self, run: Any, *, loss_terms: Callable[..., tuple[Any, ...]]) -> History:
        """Train one :class:`~probekit.train.population.TrainRun` from scratch (directory locked)."""
        from ..util.lock import DirectoryLock
        from .trainer import train  # lazy: the trainer imports torch

        task, mcfg, tcfg = self.build(run.preset, steps=run.steps, seed=run.seed,
                                      sets=list(run.sets), device=run.device)
        with DirectoryLock(run.out_dir, what="training run"):
            return train(task, mcfg, tcfg, run.out_dir, progress=False, resume=run.resume,
                         plot=False, loss_terms=loss_terms(task, tcfg))

    def base_model(self, name: str, sets: Sequence[str] | None = None) -> None:
        """``None``: a testbed preset trains from scratch."""


def _with_flag(message: str, sets: list[str], key: str | None = None) -> str:
    """``message`` with the ``--set`` item that gave the failing field (``key``), when one did."""
    for item in sets:
        name = item.partition("=")[0].rpartition(".")[2]
        if (name == key if key is not None else
                f".{name} " in message or f".{name}=" in message or f"'{name}'" in message):
            return f"--set {item}: {message}"
    return f"{message} (check --set, --seed and --steps)"


_NANDA = dict(lr=1e-3, weight_decay=1.0, betas=(0.9, 0.98), batch_size=None)
_KG_SMOKE_MODEL = dict(n_layers=2, d_model=64, n_heads=4, d_head=16, d_mlp=256)
_KG_CPU_TASK = dict(n_entities=100, n_relations=40, out_degree=20, phi=18.0)
_GPT2_MODEL = dict(n_layers=8, d_model=768, n_heads=12, d_head=64, d_mlp=3072)
# Wang et al. (2024) optimiser: AdamW wd 0.1, betas (0.9, 0.999), batch 512, grad clip 1.0
_WANG = dict(weight_decay=0.1, betas=(0.9, 0.999), batch_size=512, grad_clip=1.0)
_KG_SMOKE_TRAIN = TrainConfig(
    steps=2000, lr=1e-3, warmup_steps=100, n_evals=30, n_checkpoints=10, eval_max_examples=4000,
    **_WANG,
)
_KG_PAPER_TRAIN = TrainConfig(
    steps=1_500_000, lr=1e-4, warmup_steps=2000, n_evals=100, n_checkpoints=60,
    eval_max_examples=10_000, device="cuda", **_WANG,
)

_TESTBED_PRESETS = {
    "modular_addition": Preset(
        task="modular_addition",
        task_overrides=dict(p=53, train_fraction=0.6),
        train=TrainConfig(
            steps=3000, eval_every=25, n_checkpoints=15, lr=3e-3, weight_decay=1.0,
            betas=(0.9, 0.98), batch_size=None,
        ),
        description=(
            "CPU grokking default: Nanda et al. (2023) model, AdamW wd 1.0, betas (0.9, 0.98), "
            "full batch; smaller prime p=53 with 60% of pairs trained and lr 3e-3 (paper 1e-3) so "
            "that it groks in a few hundred steps. Measured (2 seeds): train acc 1.0 at step "
            "77/88, test acc > 0.95 at step 250/700 (lr 1e-3: seed 1 sat at 0.62 test acc at "
            "step 750). For a longer plateau use --set task.train_fraction=0.45 (seed 0: train "
            "acc 1.0 at step 77, test acc > 0.95 at step 1600)"
        ),
    ),
    "modular_addition_grokking": Preset(
        task="modular_addition",
        task_overrides=dict(p=53, train_fraction=0.45),
        train=TrainConfig(
            steps=2000, eval_every=25, n_checkpoints=15, checkpoint_steps=tuple(range(50, 2000, 50)),
            lr=3e-3, weight_decay=1.0, betas=(0.9, 0.98), batch_size=None,
        ),
        description=(
            "The CPU preset with a longer plateau for progress measures over a checkpoint series "
            "(Nanda et al. 2023 §5.1): 45% of the p=53 pairs trained, 2000 full-batch steps, a "
            "checkpoint every 50 steps (~2.5 CPU-minutes). Measured (seed 0): train acc 1.0 by "
            "step 100, held-out loss < 1 nat only at step ~1420, held-out acc 0.997 at 2000"
        ),
    ),
    "modular_addition_paper": Preset(
        task="modular_addition",
        task_overrides=dict(p=113, train_fraction=0.3),
        train=TrainConfig(steps=20_000, eval_every=250, n_evals=80, **_NANDA),
        description="Nanda et al. (2023): p=113, 30% train, full batch, 20k steps",
    ),
    "scan": Preset(
        task="scan",
        train=TrainConfig(
            steps=450, lr=1e-3, weight_decay=0.0, betas=(0.9, 0.999), batch_size=32,
            n_evals=30, n_checkpoints=10,
        ),
        description=(
            "An & Du (2026) probe sweep [C]: 4 layers, Adam lr 1e-3, batch 32, ~15 epochs of "
            "<=1000 commands (pass --set task.n_noise=3 for noisy data)"
        ),
    ),
    "scan_he_paper": Preset(
        task="scan",
        task_overrides=dict(max_samples=2000),
        model_overrides=dict(positional_embedding_type="sinusoidal"),
        train=TrainConfig(
            steps=1400, lr=1e-4, weight_decay=0.0, betas=(0.9, 0.98), batch_size=64,
            n_evals=20, n_checkpoints=5, he_lambda=0.2, he_layers=(2, 4), he_pairs=256,
            he_pool=2048, he_hidden=256, dropout=0.1,
        ),
        description=(
            "An & Du (2026) HE-regularised training [C], as close to [C]'s model as TL-native "
            "blocks allow: fixed sinusoidal positions, dropout 0.1 on attention weights, "
            "attention output and MLP output (pre-LN blocks: [C]'s are post-LN); Adam lr 1e-4, "
            "betas (0.9, 0.98), batch 64, ~50 epochs of <=2000 2-clause commands (1800 train -> "
            "29 steps/epoch), L = CE + 0.2 L_HE on blocks 2 and 4 (256 pairs/step from a "
            "2048-pair pool); --set train.he_lambda=0 for the baseline, --set task.n_noise=K "
            "for noise, --set train.he_source=batch for the batch-pair regulariser (the "
            "minibatch's own pairs, no second forward pass; a deviation from [C])"
        ),
    ),
    "kg_composition": Preset(
        task="kg_composition",
        task_overrides=_KG_CPU_TASK,
        model_overrides=_KG_SMOKE_MODEL,
        train=_KG_SMOKE_TRAIN,
        description="CPU smoke test (pipeline check only): |E|=100, 2 layers, d_model 64, 2k steps",
    ),
    "kg_composition_cpu": Preset(
        task="kg_composition",
        task_overrides=_KG_CPU_TASK,
        model_overrides=dict(n_layers=4, d_model=64, n_heads=4, d_head=16, d_mlp=256),
        train=TrainConfig(
            steps=4000, lr=1e-3, warmup_steps=100, n_evals=30, eval_every=250, n_checkpoints=10,
            eval_max_examples=4000, stop_metric="test_id/acc", stop_threshold=0.9, **_WANG,
        ),
        description=(
            "CPU composition that groks ID: |E|=100, |R|=40, phi=18, 4 layers d_model 64; stops "
            "once ID accuracy passes 0.9 (seed 0: step 2000, ~16 min on the loaded 2-core box; "
            "train 0.991, test_id 0.956, test_ood 0.010). probes/checkpoints/kg-composition"
        ),
    ),
    "kg_composition_gpu": Preset(
        task="kg_composition",
        task_overrides=dict(n_entities=500, n_relations=50, out_degree=20, phi=18.0),
        model_overrides=dict(n_layers=4, d_model=256, n_heads=8, d_head=32, d_mlp=1024),
        train=TrainConfig(
            steps=100_000, lr=1e-3, warmup_steps=1000, n_evals=80, eval_every=2000, n_checkpoints=40,
            eval_max_examples=10_000, stop_metric="test_id/acc", stop_threshold=0.95,
            device="cuda", **_WANG,
        ),
        description=(
            "circuits.md scaled-down GPU run: |E|=500, |R|=50, phi=18, 4 layers d_model 256, "
            "stop once ID accuracy passes 95%"
        ),
    ),
    "kg_composition_paper": Preset(
        task="kg_composition",
        task_overrides=dict(n_entities=2000, n_relations=200, out_degree=20, phi=18.0),
        model_overrides=_GPT2_MODEL,
        train=_KG_PAPER_TRAIN,
        description=(
            "Wang et al. (2024) GPT-2 config (no dropout / fp16 here): 8 layers, d_model 768, "
            "lr 1e-4, batch 512, 2k warm-up, up to 1.5M steps"
        ),
    ),
    "kg_comparison": Preset(
        task="kg_comparison",
        task_overrides=dict(n_entities=100, phi=7.2, n_test=1000),
        model_overrides=_KG_SMOKE_MODEL,
        train=_KG_SMOKE_TRAIN,
        description="CPU smoke test: |E|=100, 20 attributes, 2 layers, d_model 64, 2k steps",
    ),
    "kg_comparison_paper": Preset(
        task="kg_comparison",
        task_overrides=dict(n_entities=1000, phi=7.2),
        model_overrides=_GPT2_MODEL,
        train=_KG_PAPER_TRAIN,
        description="Wang et al. (2024) comparison: |E|=1000, 20 attributes, GPT-2 8 layers",
    ),
    "bio_scratch": Preset(
        task="bio_scratch",
        task_overrides=dict(n_people=200, n_values=8),
        model_overrides=dict(n_layers=2, d_model=64, n_heads=4, d_head=16, d_mlp=256),
        train=TrainConfig(
            steps=3000, lr=3e-3, weight_decay=0.1, betas=(0.9, 0.98), batch_size=32,
            warmup_steps=100, grad_clip=1.0, n_evals=4, n_checkpoints=2,
        ),
        description=(
            "Allen-Zhu & Li (2023) bioS trained from scratch, mixed training (biographies of "
            "everyone + QA of the ID half): 200 people, 8 values per attribute, 2 layers "
            "d_model 64; --set task.augmentation=5 for multi5 + permute. Measured (seed 0, "
            "~2 CPU-min each, docs/knowledge_scratch.md): augmentation 1 test_id 0.97, "
            "test_ood 0.23; augmentation 5 test_id 0.98, test_ood 0.60 (chance 0.125)"
        ),
    ),
    "relation_facts": Preset(
        task="relation_facts",
        train=TrainConfig(
            steps=1500, lr=1e-3, weight_decay=0.1, betas=(0.9, 0.999), batch_size=None,
            n_evals=30, n_checkpoints=10,
        ),
        description="200 subjects x 8 relations, 2 layers d_model 128, full batch until memorised",
    ),
}


for _name, _preset in _TESTBED_PRESETS.items():
    PRESETS.register(_name, _preset)
del _TESTBED_PRESETS


def get_preset(name: str) -> Preset:
    """The testbed :class:`Preset` called ``name``.

    Raises:
        ConfigError: an unknown name (listing the presets, suggesting a close one), or a
            fine-tune preset (listing the testbed presets).
    """
    preset = PRESETS.get(name)
    if not isinstance(preset, Preset):
        scratch = [n for n, p in PRESETS.items() if isinstance(p, Preset)]
        raise ConfigError(f"preset {name!r} fine-tunes a pretrained LM; this needs a testbed "
                          f"preset trained from scratch: one of {scratch}")
    return preset
