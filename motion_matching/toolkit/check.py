"""Check that a folder's toolkit files are each valid and describe the same frames."""
import dataclasses

from motion_matching.errors import MismatchedFiles
from motion_matching.toolkit import formats


@dataclasses.dataclass
class ToolkitSummary:
    """What the checked files hold (None where a file was not given)."""

    nframes: int = None
    nbones: int = None
    nranges: int = None
    nfeatures: int = None
    nlatent: int = None

    def lines(self):
        """Human-readable ``name: value`` lines for the known fields."""
        return [f"{field.name}: {getattr(self, field.name)}" for field in dataclasses.fields(self)
                if getattr(self, field.name) is not None]


def check_toolkit_files(*, database=None, features=None, latent=None):
    """Load each given path strictly and check their frame counts agree; returns a ``ToolkitSummary``."""
    summary = ToolkitSummary()
    counted = []
    if database is not None:
        loaded = formats.load_database(database)
        summary.nbones, summary.nranges = loaded.nbones, loaded.range_starts.size
        counted.append((database, loaded.nframes))
    if features is not None:
        loaded = formats.load_features(features)
        summary.nfeatures = loaded.features.shape[1]
        counted.append((features, loaded.features.shape[0]))
    if latent is not None:
        loaded = formats.load_latent(latent)
        summary.nlatent = loaded.shape[1]
        counted.append((latent, loaded.shape[0]))
    for (first, first_frames), (other, other_frames) in zip(counted, counted[1:]):
        if first_frames != other_frames:
            raise MismatchedFiles(other, f"has {other_frames} frames but {first} has {first_frames}")
    summary.nframes = counted[0][1] if counted else None
    return summary
