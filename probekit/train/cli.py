"""``probekit train NAME --out DIR [--steps N] [--seed S] [--set key=value ...]``.

``NAME`` is a task or preset name (:data:`probekit.train.training_preset.PRESETS`). ``--set`` overrides any
field: ``task.p=97``, ``model.d_model=64``, ``train.lr=3e-3``; a bare ``key=value`` is accepted
when exactly one of the three configs has that field. Values are parsed as JSON when possible
(``3e-3``, ``null``, ``[0.9, 0.98]``), else kept as strings. ``--seed`` sets the task, model and
train seeds together.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..errors import ConfigError
from ..executor_cli import add_executor_arguments, executor_choice
from ..util.outdir import write_marker
from .run_dir import check_run_dir
from .training_preset import PRESETS

_HELP = """\
Train a model on a built-in testbed; an existing --out directory is resumed from its last
checkpoint (bit-identical to an uninterrupted run on CPU).

--set overrides any config field: task.p=97, model.d_model=64, train.lr=3e-3. A bare
key=value works when exactly one of the task/model/train configs has that field. Values are
parsed as JSON when possible (3e-3, null, [0.9, 0.98]), else kept as strings. --seed sets the
task, model and train seeds together.

--seeds S1 S2 ... trains a population, one run per seed in --out/seed<S>, each an independent
task of --executor (in-process by default; `--executor ray --ray-address auto|HOST:6379` on a
cluster whose nodes all see --out). Rerunning resumes every run from its last checkpoint.

examples:
  probekit train modular_addition --out runs/modadd
  probekit train scan --out runs/scan --set task.n_noise=3 --steps 2000
  probekit train modular_addition --out /nfs/runs/modadd --seeds 0 1 2 3 --ray-address auto
"""

def add_train_parser(subparsers: Any, parents: Sequence[Any] = ()) -> argparse.ArgumentParser:
    """Add the ``train`` subcommand to an argparse ``subparsers``; handler in ``func``."""
    p = subparsers.add_parser(
        "train",
        parents=list(parents),
        help="train a model on a built-in testbed",
        description=_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    scratch = [name for name, preset in PRESETS.items() if not preset.pretrained]
    tunes = [name for name, preset in PRESETS.items() if preset.pretrained]
    p.add_argument("name", help=f"task or preset: {', '.join(scratch)}; or a fine-tune preset "
                   f"of a pretrained LM: {', '.join(tunes)} (docs/finetune.md)")
    p.add_argument("--out", required=True, type=Path, help="run directory (resumed if it exists)")
    p.add_argument("--steps", type=int, default=None, help="override train.steps")
    p.add_argument("--seed", type=int, default=None, help="task, model and train seed")
    p.add_argument("--seeds", type=int, nargs="+", default=None, metavar="S",
                   help="train a population: one run per seed in OUT/seed<S> (executor tasks)")
    p.add_argument("--device", default=None,
                   help="torch device: cpu, cuda, cuda:N or auto (default: the preset's)")
    p.add_argument("--set", dest="sets", action="append", default=[], metavar="KEY=VALUE",
                   help="override a config field, e.g. task.p=97 or train.lr=3e-3 (repeatable)")
    p.add_argument("--no-resume", action="store_true", help="start over even if checkpoints exist")
    p.add_argument("--force", action="store_true",
                   help="write into a non-empty --out that probekit did not write (default: refused)")
    p.add_argument("--no-progress", action="store_true", help="hide the progress bar")
    add_executor_arguments(p)
    p.set_defaults(func=run_train_command)
    return p


def run_train_command(args: argparse.Namespace) -> int:
    """Handler of ``probekit train``: trains, writes the run directory, prints a summary."""
    from ..util.device import resolve_device
    from ..util.lock import DirectoryLock
    from .build import build_run, loss_terms
    from .trainer import train

    if args.device is not None:
        resolve_device(args.device)  # one line, before anything is created
    _check_seeds(args)
    check_run_dir(args.out, force=args.force, flag="--out", force_flag="--force")
    preset = PRESETS.get(args.name)
    if args.seeds is not None or executor_choice(args) is not None or preset.pretrained:
        return _train_population(args)  # a fine-tune runs as a one-run population
    task, mcfg, tcfg = build_run(
        args.name, steps=args.steps, seed=args.seed, sets=args.sets, device=args.device
    )
    with DirectoryLock(args.out, what="training run"):  # one writer per run directory
        write_marker(args.out, "train", args.name)
        history = train(
            task, mcfg, tcfg, args.out, progress=not args.no_progress, resume=not args.no_resume,
            loss_terms=loss_terms(task, tcfg),
        )
    last = history.records[-1]
    summary = {k: v for k, v in last.items() if k == "step" or k.endswith("/acc")}
    print(json.dumps({"out": str(args.out), **summary}, indent=1))  # noqa: T201
    return 0


def _check_seeds(args: argparse.Namespace) -> None:
    """``--seed`` / ``--seeds`` are seeds of numpy and torch generators: the configs' ``SEED`` rule."""
    from ..util.constraints import SEED

    for seed in ([args.seed] if args.seed is not None else []) + list(args.seeds or []):
        if not SEED.ok(seed):
            flag = "--seed" if args.seeds is None else "--seeds"
            raise ConfigError(f"{flag} {seed}: a seed must be {SEED.rule}; e.g. {flag} 0")


def _train_population(args: argparse.Namespace) -> int:
    """``--seeds`` / ``--executor``: one :class:`~.population.TrainRun` per seed on the executor."""
    from ..executor import check_worker_paths
    from ..executor_cli import executor_from_args
    from .population import TrainRun, planned_steps, train_population

    if args.seeds is not None and args.seed is not None:
        raise ConfigError("give --seed (one run) or --seeds (a population), not both")
    seeds = args.seeds if args.seeds is not None else [args.seed]
    if len(set(seeds)) != len(seeds):
        raise ConfigError(f"--seeds {seeds}: a seed is repeated; give each seed once")
    planned_steps(args.name, steps=args.steps, seed=seeds[0], sets=args.sets, device=args.device)
    executor = executor_from_args(args, progress=not args.no_progress)
    out = args.out.expanduser().resolve()
    population = args.seeds is not None
    runs = [TrainRun(preset=args.name, out_dir=str(out / f"seed{s}") if population else str(out),
                     seed=s, steps=args.steps, sets=tuple(args.sets), device=args.device,
                     resume=not args.no_resume) for s in seeds]
    out.mkdir(parents=True, exist_ok=True)
    write_marker(out, "train", args.name)
    if executor is not None:
        check_worker_paths(executor, write=[out])  # workers write the run directories
    histories = train_population(runs, executor)
    for run, history in zip(runs, histories):
        last = history.records[-1]
        summary = {k: v for k, v in last.items() if k == "step" or k.endswith("/acc")}
        print(json.dumps({"out": run.out_dir, **summary}))  # noqa: T201
    return 0
