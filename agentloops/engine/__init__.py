"""The engine: each loop's decisions live once, in a step machine that asks for effects,
and drivers perform them (`sync`: this thread and daemon threads; `aio`: asyncio).

Loops use it through `run`, `arun`, `stream` and `astream`. A test can drive a machine by
hand: take `loop.machine(task)`, read each effect it yields, and send the outcome back.

Examples:
    >>> from agentloops import ReActLoop
    >>> from agentloops.engine.effects import CallModel
    >>> from agentloops.testing import ScriptedModel, respond
    >>> machine = ReActLoop(ScriptedModel([]), []).machine("Hi?", run_id="r1")
    >>> effect = next(machine)
    >>> isinstance(effect, CallModel), effect.request.messages[0].text
    (True, 'Hi?')
    >>> try:
    ...     machine.send(respond("Hello."))
    ... except StopIteration as done:
    ...     result = done.value
    >>> result.answer, result.stop_reason
    ('Hello.', 'answered')

Rule: the engine knows the vocabulary, tools and the run stores, and no loop: the loops
import it.
"""
