"""What training any of the toolkit's networks needs, whichever network it is.

``run.TrainingRun`` is the loop (rolling loss, saves of the runtime ``.bin`` at the save interval,
schedule, checkpoints, progress, Ctrl-C at a step boundary, thread policy); ``step`` the optimiser
step (the toolkit's or the fast one) and precision; ``schedule`` the learning-rate schedules;
``config.CommonConfig`` the settings every network shares; ``checkpoint``, ``resume`` and ``rerun``
the checkpoint file, exact resume, and the rules for files an earlier run left (continue, ``--force``).
A network's package (``projector/``, ``decompressor/``) subclasses ``TrainingRun`` with its model,
batches, losses and runtime files.
"""
