"""The runners and the loop they drive (SPEC §12).

``loop`` opens, takes and records one step at a time, planned from the journal (``plan``);
``model_step`` and ``tool_step`` are the two kinds of step. ``inline`` and ``durable`` drive runs
over the same rows; ``sweep`` runs the jobs installed apps ask for and re-drives runs whose
driver died. This process's runner is ``agent_core.engine.dispatch.get_runner()``: code that makes
a run
runnable reaches it from there, never by importing this package.
"""
