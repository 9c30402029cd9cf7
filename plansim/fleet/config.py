"""``fleet.yaml``: the inventory of GPUs, an optional budget, and the models the fleet serves.

```yaml
inventory:                      # per GPU system (AIConfigurator's names): what the fleet may hold
  h200_sxm: {count: 64, price_per_gpu_hour: 3.5}
  h100_sxm: {count: 32, price_per_gpu_hour: 2.2,
             spot: {price_per_gpu_hour: 0.9, preemptions_per_hour: 0.05}}
budget_per_hour: 150            # optional: the most the fleet may cost per hour
seed: 0                         # optional: the seed of spot preemptions
models:
  - name: chat                  # letters, digits, _ . - (it names the model's output folder)
    trace: traces/chat.jsonl.gz # a file, glob or folder, or a list of them
    format: auto                # optional, as plansim replay's --format
    trace_block_size: 512       # optional, as --trace-block-size
    deployment: chat.yaml       # engine (aic timing), router, planner, sla
    search: {engine.timing_model.system: [h200_sxm, h100_sxm],
             engine.timing_model.tp_size: [1, 2], mode: [agg, disagg]}
    target: 0.95                # goodput ratio to meet
    max_gpu_budget: 32          # optional: the most GPUs one deployment of it may hold
```

``count`` is how many GPUs of that system the fleet may hold at once; with ``spot`` each of
them may be taken on demand or as spot capacity, at the spot price, each spot GPU preempted
``preemptions_per_hour`` times per hour on average (a worker is lost with any of its GPUs).
A search key is a dotted deployment key, as in ``plansim capacity --search``;
``timing_model.KEY`` is short for ``engine.timing_model.KEY``. Relative paths resolve against
the fleet file's folder. Every mistake is one ``ConfigError`` naming the file and the key.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from pydantic import Field, ValidationError, field_validator, model_validator

from plansim.configfile import read_config
from plansim.validation import StrictModel, config_error

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
SHORTHAND = "timing_model."


class SpotSpec(StrictModel):
    """Spot capacity of a GPU system: its price and how often a spot GPU is preempted."""

    price_per_gpu_hour: float = Field(gt=0)
    preemptions_per_hour: float = Field(ge=0)


class SystemSpec(StrictModel):
    """One GPU system of the inventory."""

    count: int = Field(ge=0)
    price_per_gpu_hour: float = Field(gt=0)
    spot: SpotSpec | None = None


class ModelSpec(StrictModel):
    """One model of the fleet: its traffic, deployment, search space and goodput target."""

    name: str
    trace: list[str]
    format: str = "auto"
    trace_block_size: int | None = Field(default=None, ge=1)
    deployment: str
    search: dict[str, list[Any]] = Field(default_factory=dict)
    target: float = Field(default=0.95, gt=0, le=1)
    max_gpu_budget: int | None = Field(default=None, ge=1)

    @field_validator("name")
    @classmethod
    def _plain_name(cls, value: str) -> str:
        if not _NAME.match(value):
            raise ValueError(
                f"{value!r}: use letters, digits, '_', '.' and '-' (it names a "
                "folder), starting with a letter or digit"
            )
        return value

    @field_validator("trace", mode="before")
    @classmethod
    def _one_or_more(cls, value: Any) -> Any:
        return [value] if isinstance(value, str) else value

    @field_validator("search")
    @classmethod
    def _values(cls, value: dict[str, list[Any]]) -> dict[str, list[Any]]:
        out = {}
        for key, values in value.items():
            if not values:
                raise ValueError(f"search.{key}: give one or more values")
            if len(set(map(repr, values))) != len(values):
                raise ValueError(f"search.{key}: a value is repeated")
            full = "engine." + key if key.startswith(SHORTHAND) else key
            if full in out:
                raise ValueError(f"search.{key}: searched twice")
            out[full] = values
        return out


class FleetSpec(StrictModel):
    """A whole ``fleet.yaml``."""

    inventory: dict[str, SystemSpec] = Field(min_length=1)
    budget_per_hour: float | None = Field(default=None, gt=0)
    seed: int = Field(default=0, ge=0)
    models: list[ModelSpec] = Field(min_length=1)

    @field_validator("inventory")
    @classmethod
    def _known_systems(cls, value: dict[str, SystemSpec]) -> dict[str, SystemSpec]:
        from plansim.aic import sdk

        if sdk.sdk_version() is None:
            raise ValueError(sdk.MISSING_SDK)
        systems = sdk.support_matrix().systems()
        for name in value:
            if name not in systems:
                raise ValueError(
                    f"inventory.{name}: not a GPU system of AIConfigurator "
                    f"{sdk.sdk_version()}; supported systems: {', '.join(systems)}"
                )
        return value

    @model_validator(mode="after")
    def _unique_names(self) -> FleetSpec:
        seen: set[str] = set()
        for k, model in enumerate(self.models):
            if model.name in seen:
                raise ValueError(f"models.{k}.name: {model.name!r} is used twice")
            seen.add(model.name)
        return self


def load_fleet(path: str | Path) -> FleetSpec:
    """Read and validate ``fleet.yaml``; relative paths are made absolute against its folder."""
    source = Path(path)
    raw = read_config(source, what="fleet file")
    try:
        spec = FleetSpec.model_validate(raw)
    except ValidationError as exc:
        raise config_error(exc, source=str(source)) from None
    base = source.parent
    models = [
        m.model_copy(
            update={
                "trace": [str(_resolve(base, t)) for t in m.trace],
                "deployment": str(_resolve(base, m.deployment)),
            }
        )
        for m in spec.models
    ]
    return spec.model_copy(update={"models": models})


def _resolve(base: Path, value: str) -> Path:
    p = Path(value).expanduser()
    return p if p.is_absolute() else base / p
