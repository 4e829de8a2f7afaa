"""One command from a changed database.bin to the runtime's three networks (``mm-projector retrain``).

Stages, in order: features, decompressor, neighbour cache, projector, stepper, verify (docs/pipeline.md).
``run.run_retrain`` runs them make-like: a stage runs only when its inputs, its settings or its outputs
changed since the state file (``state.STATE_NAME``) recorded them.
"""
