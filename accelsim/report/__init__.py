"""Reports at the edge: tidy tables in, Markdown and matplotlib figures out (no model runs here).
``figures`` draws the HFP8 study, ``plot`` any sweep table, ``formats`` and ``swamping`` their
studies."""
