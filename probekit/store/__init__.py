"""Activation store: sharded safetensors + JSON manifest, atomic writes, resumable, mmap reads."""

from .manifest import Manifest as Manifest
from .reader import ActivationStore as ActivationStore
from .safetensors_mmap import CorruptShardError as CorruptShardError
from .writer import StoreWriter as StoreWriter
