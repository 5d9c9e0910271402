"""The metric: ``safety_consistency`` and its stages, on the engine.

Users meet the fronts (:func:`safety_consistency`, :func:`safety_consistency_async`,
:func:`planned_calls`, the stages :func:`respond` and :func:`judge_responses`, all at the top
level of :mod:`safecons`), :func:`safety_consistency_run` and :class:`SafetyConsistencyRun`
(the scored frame with what only the run knows: elapsed time, the most calls in flight) and
:class:`MetricOptions`, the keyword options every front takes, and the types of what they take
as a system under test and a judge (:data:`SUT`, :data:`Judge`, :data:`ChatFunction`).

- :mod:`._fronts`: the fronts.
- :mod:`._job`: a call of the metric, validated once (:class:`Job`); LazyFrame batches.
- :mod:`._comparisons`: the metric's units on the engine: each SUT sample, then its judge call.
- :mod:`._postures`: each answer's posture, read in a worker thread while the calls go on.
- :mod:`._jurors`: a comparison judged by a jury (one judge is a jury of one): every
  juror's call through the engine, then the verdict; :func:`judge_sample`, the judge unit
  that ``audit_judge`` runs too.
- :mod:`._judging`: a judge, whatever the user passed (chat client, callable, ``LLMJudge``,
  judge object), as one thing a unit can ask for a verdict.
- :mod:`._plan`: the dry run (:class:`CallPlan`).
- :mod:`._types`: :data:`SUT`, :data:`Judge`, :data:`ChatFunction`.
- :mod:`._inputs`: the checks of a frame before any call.
- :mod:`._lazy`: the LazyFrame source (head, filter and projection pushdown).
"""

from ._comparisons import Sessions as Sessions
from ._comparisons import open_sessions as open_sessions
from ._fronts import judge_responses as judge_responses
from ._fronts import planned_calls as planned_calls
from ._fronts import respond as respond
from ._fronts import safety_consistency as safety_consistency
from ._fronts import safety_consistency_async as safety_consistency_async
from ._fronts import safety_consistency_run as safety_consistency_run
from ._fronts import score_expr as score_expr
from ._job import LAZY_BATCH_ROWS as LAZY_BATCH_ROWS
from ._job import Job as Job
from ._job import MetricOptions as MetricOptions
from ._job import SafetyConsistencyRun as SafetyConsistencyRun
from ._judging import JudgeSession as JudgeSession
from ._judging import check_judge as check_judge
from ._judging import open_judge as open_judge
from ._jurors import judge_sample as judge_sample
from ._plan import CallPlan as CallPlan
from ._types import SUT as SUT
from ._types import ChatFunction as ChatFunction
from ._types import Judge as Judge

__all__ = (
    "LAZY_BATCH_ROWS",
    "SUT",
    "CallPlan",
    "ChatFunction",
    "Job",
    "Judge",
    "JudgeSession",
    "MetricOptions",
    "SafetyConsistencyRun",
    "Sessions",
    "check_judge",
    "judge_responses",
    "judge_sample",
    "open_judge",
    "open_sessions",
    "planned_calls",
    "respond",
    "safety_consistency",
    "safety_consistency_async",
    "safety_consistency_run",
    "score_expr",
)
