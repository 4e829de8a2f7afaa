"""Commands: export."""
from .group import main, reports_errors  # noqa: F401
