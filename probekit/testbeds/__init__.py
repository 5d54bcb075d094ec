"""Built-in testbeds: modular addition, SCAN-like language, knowledge-graph reasoning, relation facts.

Plus the text testbed of synthetic biographies for fine-tuning pretrained LMs
(:mod:`probekit.testbeds.biographies`, written as JSONL, not a token :class:`Task`).

Every task exposes ``vocab`` (:class:`Vocab`), ``splits() -> dict[str, TaskDataset]`` and
``model_config()``; see :mod:`probekit.testbeds.base` for the token/target alignment.
"""

from .base import IGNORE_INDEX as IGNORE_INDEX
from .base import PaddedBatch as PaddedBatch
from .base import Task as Task
from .base import TaskDataset as TaskDataset
from .base import Vocab as Vocab
from .base import pad_examples as pad_examples
from .bio_scratch import BioScratch as BioScratch
from .bio_scratch import BioScratchConfig as BioScratchConfig
from .biographies import Biographies as Biographies
from .biographies import BiographiesConfig as BiographiesConfig
from .biographies import write_biographies as write_biographies
from .knowledge import KGComparisonConfig as KGComparisonConfig
from .knowledge import KGCompositionConfig as KGCompositionConfig
from .knowledge import KnowledgeComparison as KnowledgeComparison
from .knowledge import KnowledgeComposition as KnowledgeComposition
from .modular import ModularAddition as ModularAddition
from .modular import ModularAdditionConfig as ModularAdditionConfig
from .registry import TASKS as TASKS
from .registry import get_task as get_task
from .registry import task_from_dict as task_from_dict
from .registry import task_names as task_names
from .relation_facts import RelationFacts as RelationFacts
from .relation_facts import RelationFactsConfig as RelationFactsConfig
from .scan import ScanConfig as ScanConfig
from .scan import ScanTask as ScanTask
from .scan import interpret_command as interpret_command
