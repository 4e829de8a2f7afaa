"""BVH clips: the text format, importing clips into a database and exporting a database to clips."""
