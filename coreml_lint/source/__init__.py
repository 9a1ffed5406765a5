"""Source rules: lint model code and export scripts without exporting anything."""
