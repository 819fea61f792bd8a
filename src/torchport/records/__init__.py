"""The values and rules of the evidence: a result and its validation (``result``), the closed
set of statuses, stages and grades (``status``), the figures and the rules a comparison decides
by (``figures``), error signatures, case globs, the words a report repeats and an export line's
text. Storage and reads are the knowledge base's (``torchport.kb``), a layer above. Never
imports torch.
"""

from torchport.records.result import MalformedResult  # noqa: F401
from torchport.records.status import STATUSES as RESULT_STATUSES  # noqa: F401
