"""What every concept's queries share: the session they run in (`s`) and the name of its
SQL dialect (`dialect`)."""

from __future__ import annotations

from sqlalchemy.orm import Session


class RepositoryBase:
    def __init__(self, session: Session) -> None:
        self.s = session
        self.dialect = session.get_bind().dialect.name
