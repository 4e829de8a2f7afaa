"""The console script's group: every command's module is known, and commands load only what they use."""
import importlib
import pathlib
import subprocess
import sys

from click.testing import CliRunner

from motion_matching.cli import group, main

from conftest import TORCH_ABSENT, needs_torch

ROOT = pathlib.Path(__file__).parent.parent


def test_every_registered_command_is_in_the_module_table():
    needs_torch()  # train, export, demo
    for module in set(group.COMMAND_MODULES.values()):
        importlib.import_module(f"motion_matching.cli.{module}")
    assert set(main.commands) == set(group.COMMAND_MODULES)
    assert CliRunner().invoke(main, ["--help"]).exit_code == 0


def test_cache_and_file_commands_start_without_torch():
    script = ("import sys\nfrom click.testing import CliRunner\nfrom motion_matching.cli import main\n"
              "for name in ('cache-info', 'verify-cache', 'build-cache', 'check-files', 'generate-database'):\n"
              "    assert CliRunner().invoke(main, [name, '--help']).exit_code == 0, name\n"
              "print('torch' in sys.modules)\n")
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "False"


def test_top_level_help_lists_every_command_without_importing_torch():
    script = ("import sys\nfrom motion_matching.cli import main\n"
              "try:\n    main(['--help'])\nexcept SystemExit as stop:\n    assert stop.code == 0\n"
              "print('torch' in sys.modules)\n")
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    assert result.stdout.strip().endswith("False")
    for name, (_, line) in group.COMMANDS.items():
        assert f"{name} " in result.stdout and line.split()[0] in result.stdout


def test_each_command_shows_the_summary_of_the_table():
    for name in group.COMMANDS:
        if TORCH_ABSENT and group.COMMAND_MODULES[name] in ("train", "export", "demo"):
            continue  # their modules import torch
        assert main.get_command(None, name).get_short_help_str(limit=200) == group.summary(name)


def test_usage_errors_are_one_line_and_exit_2():
    for args, problem in ((["build-cache", "--no-such-option"], "No such option '--no-such-option'"),
                          (["build-cache", "--queries", "many"], "Invalid value for '--queries'"),
                          (["check-files"], "give at least one of --database"),
                          (["no-such-command"], "No such command 'no-such-command'")):
        result = CliRunner().invoke(main, args)
        assert result.exit_code == group.USAGE_EXIT, args
        assert result.output.count("\n") == 1 and result.output.startswith("Error: ") and problem in result.output
        assert "--help')" in result.output


def test_the_toolkit_script_names_print_usage_errors_in_one_line():
    for script in ("generate_database.py",) + (() if TORCH_ABSENT else ("train_projector.py",)):
        result = subprocess.run([sys.executable, script, "--no-such-option"], capture_output=True, text=True,
                                cwd=ROOT)
        assert result.returncode == group.USAGE_EXIT
        assert result.stderr.count("\n") == 1 and result.stderr.startswith("Error: No such option")


HELP_WITHOUT_TORCH = """
import sys
from click.testing import CliRunner
from motion_matching.cli import main
for name in ("train", "export", "evaluate", "demo"):
    result = CliRunner().invoke(main, [name, "--help"])
    assert result.exit_code == 0, (name, result.output)
    command = main.get_command(None, name)
    missing = [option for parameter in command.params for option in parameter.opts + parameter.secondary_opts
               if option.startswith("-") and option not in result.output]
    assert not missing and command.params, (name, missing)
sys.argv = ["train_projector.py", "--help"]
import runpy
try:
    runpy.run_path("train_projector.py", run_name="__main__")
except SystemExit as stop:
    assert stop.code == 0
print(sorted(name for name in ("torch", "motion_matching.projector.train") if name in sys.modules))
"""


def test_help_of_the_training_commands_answers_without_importing_torch():
    result = subprocess.run([sys.executable, "-c", HELP_WITHOUT_TORCH], capture_output=True, text=True, cwd=ROOT)
    assert result.returncode == 0, result.stderr
    assert "--offline" in result.stdout and "--recipe" in result.stdout  # train_projector.py's own help
    assert result.stdout.splitlines()[-1] == "[]"
