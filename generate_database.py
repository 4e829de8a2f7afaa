"""The toolkit's script name: write database.bin, features.bin and latent.bin.

``python generate_database.py`` writes a synthetic locomotion database into the current folder;
``--help`` lists the options (the same as ``mm-projector generate-database``).
"""
from motion_matching.interrupts import interrupts_exit

with interrupts_exit():  # from the first import on, Ctrl-C prints one line and exits 130
    import logging

    from motion_matching.cli.data import generate_database
    from motion_matching.cli.group import ENV_PREFIX

    if __name__ == "__main__":
        logging.basicConfig(level=logging.INFO, format="%(message)s")
        generate_database(prog_name="generate_database.py", auto_envvar_prefix=ENV_PREFIX)
