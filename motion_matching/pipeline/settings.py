"""What a retrain run trains: one recipe for every network, per-network recipes and iterations on top.

Torch-free, so that ``mm-projector retrain --help`` answers at once. A network that has no recipe of the
asked name trains the nearest it has (``preview``: its ``fast`` one; otherwise its ``toolkit`` one); a stepper
whose recipe comes from ``recipe`` (not ``recipes``) trains the one for the database's size
(``stepper.config.recipe_for_database``) once ``database_frames`` is known; ``note`` says so.
"""
import dataclasses
import typing

from motion_matching.decompressor import config as decompressor_config
from motion_matching.errors import InvalidOption
from motion_matching.projector import recipes as projector_recipes
from motion_matching.stepper import config as stepper_config
from motion_matching.toolkit import recipe as toolkit_recipe

NETWORKS = {"decompressor": decompressor_config, "projector": projector_recipes, "stepper": stepper_config}
RECIPE_NAMES = ("fast", "preview", "toolkit")
DEFAULT_RECIPE = "fast"
NEAREST_RECIPE = {"preview": "fast"}  # what a network without the asked recipe trains (else: toolkit)
DEFAULT_CACHE_QUERIES = toolkit_recipe.QUERIES  # what both projector recipes draw: 16,000,000
HOW_NOT_WHAT = ("threads",)  # settings that never make a stage rerun: a thread count changes no file's meaning


def network_recipes(network):
    """The recipe names (tuple of str) that network ``network`` offers today."""
    return tuple(NETWORKS[network].RECIPES)


@dataclasses.dataclass(frozen=True)
class RetrainSettings:
    """The settings of one retrain run (frozen).

    ``recipe``: every network's recipe; ``recipes`` and ``iterations``: per network (name -> recipe name or
    iteration count), on top; ``cache_queries``: rows of the neighbour cache (independent of the projector's
    recipe, so that changing it leaves the cache as it is, but at least one of its batches: ``InvalidOption``
    otherwise); ``threads``: CPU threads (None: the stages' own policy); ``database_frames``: the frames of
    database.bin (None: not known yet; ``for_database`` sets it).
    """

    recipe: str = DEFAULT_RECIPE
    recipes: typing.Mapping[str, str] = dataclasses.field(default_factory=dict)
    iterations: typing.Mapping[str, int] = dataclasses.field(default_factory=dict)
    cache_queries: int = DEFAULT_CACHE_QUERIES
    threads: typing.Optional[int] = None
    database_frames: typing.Optional[int] = None

    def __post_init__(self):
        batch = self.config("projector").batch_size
        if self.cache_queries < batch:  # here, not when the projector's stage opens the cache
            raise InvalidOption("--cache-queries", f"{self.cache_queries:,} is fewer than one batch of the "
                                f"projector's {self.recipe_of('projector')!r} recipe; give at least {batch:,}")

    def asked_recipe(self, network):
        """The recipe name (str) asked for ``network``."""
        return self.recipes.get(network) or self.recipe

    def for_database(self, nframes):
        """These settings (a new ``RetrainSettings``) for a database.bin of ``nframes`` frames."""
        return dataclasses.replace(self, database_frames=int(nframes))

    def recipe_of(self, network):
        """The recipe name (str) ``network`` trains: the asked one, or the nearest it has, or for the stepper
        without a recipe of its own the one for the database's size."""
        asked, offered = self.asked_recipe(network), network_recipes(network)
        while asked not in offered:
            asked = NEAREST_RECIPE.get(asked, "toolkit")
        if self._sized_by_database(network):
            return stepper_config.recipe_for_database(asked, self.database_frames)
        return asked

    def _sized_by_database(self, network):
        return network == "stepper" and not self.recipes.get(network) and self.database_frames is not None

    def config(self, network):
        """The network's training config (its package's ``recipe_config`` with this run's overrides)."""
        overrides = {"threads": self.threads}
        if self.iterations.get(network) is not None:
            overrides["iterations"] = int(self.iterations[network])
        return NETWORKS[network].recipe_config(self.recipe_of(network), **overrides)

    def note(self, network):
        """A line (str) when ``network`` trains another recipe than the asked one, else None."""
        if network not in NETWORKS or self.recipe_of(network) == self.asked_recipe(network):
            return None
        asked, trained = self.asked_recipe(network), self.recipe_of(network)
        if asked in network_recipes(network):
            return (f"database.bin has {self.database_frames:,} frames, fewer than "
                    f"{stepper_config.SMALL_DATABASE_FRAMES:,}: it trains its {trained!r} recipe, ahead of {asked!r} "
                    f"there (--{network}-recipe {asked} trains {asked!r})")
        return f"it has no {asked!r} recipe yet: it trains its {trained!r} recipe"


def recorded_settings(config):
    """The settings of ``config`` (a training config) that a stage's record keeps: a dict without ``HOW_NOT_WHAT``."""
    return {name: value for name, value in config.to_dict().items() if name not in HOW_NOT_WHAT}
