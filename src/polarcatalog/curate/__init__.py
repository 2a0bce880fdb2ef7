"""Catalog curation: species -> article -> visual summary -> chunks; candidates -> anchor filter -> anchors."""
