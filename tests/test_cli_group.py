"""The console script's group: every command's module is known, and commands load only what they use."""
import importlib
import subprocess
import sys

from click.testing import CliRunner

from motion_matching.cli import group, main


def test_every_registered_command_is_in_the_module_table():
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
