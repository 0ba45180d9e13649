"""Alembic migrations of the knowledge base, shipped inside the package so `kb db upgrade`
finds them from any install."""
