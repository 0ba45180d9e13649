"""initial schema

Revision ID: 0001
Revises:
Create Date: 2026-11-30

Written for both SQLite and Postgres; types are spelled out here (not imported from
kb.db.models) so this revision never changes when the models do.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

JSON = sa.JSON().with_variant(postgresql.JSONB(), "postgresql")
ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
TS = sa.DateTime(timezone=True)

revision = '0001'
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table('incidents',
    sa.Column('id', ID, nullable=False),
    sa.Column('slug', sa.String(length=200), nullable=True),
    sa.Column('title', sa.String(length=500), nullable=False),
    sa.Column('notes', sa.Text(), nullable=True),
    sa.Column('tags', JSON, nullable=False),
    sa.Column('summary', sa.Text(), nullable=True),
    sa.Column('links', JSON, nullable=False),
    sa.Column('engine', sa.String(length=40), nullable=True),
    sa.Column('affected_versions', sa.String(length=200), nullable=True),
    sa.Column('fixed_in', sa.String(length=40), nullable=True),
    sa.Column('model_archs', JSON, nullable=False),
    sa.Column('gpu_families', JSON, nullable=False),
    sa.Column('phase', sa.String(length=40), nullable=True),
    sa.Column('engine_limitation', sa.Boolean(), nullable=False),
    sa.Column('next_incident_id', ID, nullable=True),
    sa.Column('merged_into_id', ID, nullable=True),
    sa.Column('fingerprint_hash', sa.String(length=128), nullable=True),
    sa.Column('fingerprint_version', sa.String(length=20), nullable=True),
    sa.Column('signature', sa.Text(), nullable=True),
    sa.Column('exception', sa.String(length=300), nullable=True),
    sa.Column('recommended_path', sa.String(length=20), nullable=False),
    sa.Column('seeded', sa.Boolean(), nullable=False),
    sa.Column('seed_digest', sa.String(length=64), nullable=True),
    sa.Column('occurrence_count', sa.Integer(), nullable=False),
    sa.Column('first_seen', TS, nullable=True),
    sa.Column('last_seen', TS, nullable=True),
    sa.Column('created_at', TS, nullable=False),
    sa.Column('updated_at', TS, nullable=False),
    sa.ForeignKeyConstraint(['merged_into_id'], ['incidents.id'], name=op.f('fk_incidents_merged_into_id_incidents'), ondelete='SET NULL'),
    sa.ForeignKeyConstraint(['next_incident_id'], ['incidents.id'], name=op.f('fk_incidents_next_incident_id_incidents'), ondelete='SET NULL'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_incidents')),
    sa.UniqueConstraint('slug', name=op.f('uq_incidents_slug'))
    )
    op.create_index('ix_incidents_engine_phase', 'incidents', ['engine', 'phase'])
    op.create_index(op.f('ix_incidents_exception'), 'incidents', ['exception'])
    op.create_index(op.f('ix_incidents_fingerprint_hash'), 'incidents', ['fingerprint_hash'])
    op.create_index('ix_incidents_last_seen', 'incidents', ['last_seen'])
    op.create_index(op.f('ix_incidents_merged_into_id'), 'incidents', ['merged_into_id'])
    op.create_index('ix_incidents_recommended_path', 'incidents', ['recommended_path'])

    op.create_table('fixes',
    sa.Column('id', ID, nullable=False),
    sa.Column('incident_id', ID, nullable=False),
    sa.Column('title', sa.String(length=500), nullable=False),
    sa.Column('kind', sa.String(length=20), nullable=False),
    sa.Column('description', sa.Text(), nullable=True),
    sa.Column('change', JSON, nullable=False),
    sa.Column('applies_to', JSON, nullable=False),
    sa.Column('seeded', sa.Boolean(), nullable=False),
    sa.Column('seed_key', sa.String(length=240), nullable=True),
    sa.Column('curated_worked', sa.Integer(), nullable=False),
    sa.Column('curated_failed', sa.Integer(), nullable=False),
    sa.Column('author', sa.String(length=200), nullable=True),
    sa.Column('created_at', TS, nullable=False),
    sa.Column('updated_at', TS, nullable=False),
    sa.ForeignKeyConstraint(['incident_id'], ['incidents.id'], name=op.f('fk_fixes_incident_id_incidents'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_fixes')),
    sa.UniqueConstraint('seed_key', name=op.f('uq_fixes_seed_key'))
    )
    op.create_index(op.f('ix_fixes_incident_id'), 'fixes', ['incident_id'])

    op.create_table('incident_facets',
    sa.Column('incident_id', ID, nullable=False),
    sa.Column('kind', sa.String(length=20), nullable=False),
    sa.Column('value', sa.String(length=200), nullable=False),
    sa.ForeignKeyConstraint(['incident_id'], ['incidents.id'], name=op.f('fk_incident_facets_incident_id_incidents'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('incident_id', 'kind', 'value', name=op.f('pk_incident_facets'))
    )
    op.create_index('ix_incident_facets_kind_value', 'incident_facets', ['kind', 'value'])

    op.create_table('incident_fingerprints',
    sa.Column('id', ID, nullable=False),
    sa.Column('incident_id', ID, nullable=False),
    sa.Column('version', sa.String(length=20), nullable=False),
    sa.Column('hash', sa.String(length=128), nullable=False),
    sa.Column('route_key', sa.String(length=64), nullable=False),
    sa.Column('source', sa.String(length=20), nullable=False),
    sa.Column('exception', sa.String(length=300), nullable=False),
    sa.Column('message_key', sa.String(length=120), nullable=False),
    sa.Column('message_template', sa.Text(), nullable=False),
    sa.Column('frames', JSON, nullable=False),
    sa.Column('engine', sa.String(length=40), nullable=True),
    sa.Column('engine_version', sa.String(length=60), nullable=True),
    sa.Column('model_arch', sa.String(length=120), nullable=True),
    sa.Column('gpu_name', sa.String(length=120), nullable=True),
    sa.Column('gpu_count', sa.Integer(), nullable=True),
    sa.Column('tp', sa.Integer(), nullable=True),
    sa.Column('dp', sa.Integer(), nullable=True),
    sa.Column('pp', sa.Integer(), nullable=True),
    sa.Column('ep', sa.Integer(), nullable=True),
    sa.Column('phase', sa.String(length=40), nullable=True),
    sa.Column('created_at', TS, nullable=False),
    sa.ForeignKeyConstraint(['incident_id'], ['incidents.id'], name=op.f('fk_incident_fingerprints_incident_id_incidents'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_incident_fingerprints')),
    sa.UniqueConstraint('route_key', name='uq_incident_fingerprints_route_key')
    )
    op.create_index('ix_incident_fingerprints_engine_phase_id', 'incident_fingerprints', ['engine', 'phase', 'id'])
    op.create_index('ix_incident_fingerprints_exception_id', 'incident_fingerprints', ['exception', 'id'])
    op.create_index('ix_incident_fingerprints_exception_key', 'incident_fingerprints', ['exception', 'message_key'])
    op.create_index('ix_incident_fingerprints_version_hash', 'incident_fingerprints', ['version', 'hash'])
    op.create_index(op.f('ix_incident_fingerprints_incident_id'), 'incident_fingerprints', ['incident_id'])

    op.create_table('occurrences',
    sa.Column('id', ID, nullable=False),
    sa.Column('incident_id', ID, nullable=False),
    sa.Column('fingerprint_hash', sa.String(length=128), nullable=True),
    sa.Column('match_status', sa.String(length=20), nullable=False),
    sa.Column('match_score', sa.Float(), nullable=True),
    sa.Column('analysis', JSON, nullable=False),
    sa.Column('log_gz', sa.LargeBinary(), nullable=False),
    sa.Column('log_bytes', sa.Integer(), nullable=False),
    sa.Column('log_lines', sa.Integer(), nullable=False),
    sa.Column('redactions', sa.Integer(), nullable=False),
    sa.Column('engine', sa.String(length=40), nullable=True),
    sa.Column('engine_version', sa.String(length=60), nullable=True),
    sa.Column('model', sa.String(length=300), nullable=True),
    sa.Column('model_arch', sa.String(length=120), nullable=True),
    sa.Column('gpu_name', sa.String(length=120), nullable=True),
    sa.Column('gpu_count', sa.Integer(), nullable=True),
    sa.Column('tp', sa.Integer(), nullable=True),
    sa.Column('dp', sa.Integer(), nullable=True),
    sa.Column('pp', sa.Integer(), nullable=True),
    sa.Column('ep', sa.Integer(), nullable=True),
    sa.Column('phase', sa.String(length=40), nullable=True),
    sa.Column('reporter', sa.String(length=200), nullable=True),
    sa.Column('host', sa.String(length=200), nullable=True),
    sa.Column('command', sa.Text(), nullable=True),
    sa.Column('exit_code', sa.Integer(), nullable=True),
    sa.Column('created_at', TS, nullable=False),
    sa.ForeignKeyConstraint(['incident_id'], ['incidents.id'], name=op.f('fk_occurrences_incident_id_incidents'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_occurrences'))
    )
    op.create_index('ix_occurrences_incident_created', 'occurrences', ['incident_id', 'created_at'])

    op.create_table('fix_outcomes',
    sa.Column('id', ID, nullable=False),
    sa.Column('fix_id', ID, nullable=False),
    sa.Column('worked', sa.Boolean(), nullable=False),
    sa.Column('note', sa.Text(), nullable=True),
    sa.Column('engine', sa.String(length=40), nullable=True),
    sa.Column('engine_version', sa.String(length=60), nullable=True),
    sa.Column('model_arch', sa.String(length=120), nullable=True),
    sa.Column('gpu', sa.String(length=120), nullable=True),
    sa.Column('reporter', sa.String(length=200), nullable=True),
    sa.Column('created_at', TS, nullable=False),
    sa.ForeignKeyConstraint(['fix_id'], ['fixes.id'], name=op.f('fk_fix_outcomes_fix_id_fixes'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_fix_outcomes'))
    )
    op.create_index(op.f('ix_fix_outcomes_fix_id'), 'fix_outcomes', ['fix_id'])
    if op.get_bind().dialect.name == "postgresql":
        # The log is stored gzip-compressed already: keep Postgres from compressing it again.
        op.execute("ALTER TABLE occurrences ALTER COLUMN log_gz SET STORAGE EXTERNAL")



def downgrade() -> None:
    op.drop_index(op.f('ix_fix_outcomes_fix_id'), table_name='fix_outcomes')

    op.drop_table('fix_outcomes')
    op.drop_index('ix_occurrences_incident_created', table_name='occurrences')

    op.drop_table('occurrences')
    op.drop_index(op.f('ix_incident_fingerprints_incident_id'), table_name='incident_fingerprints')
    op.drop_index('ix_incident_fingerprints_exception_key', table_name='incident_fingerprints')
    op.drop_index('ix_incident_fingerprints_version_hash', table_name='incident_fingerprints')
    op.drop_index('ix_incident_fingerprints_exception_id', table_name='incident_fingerprints')
    op.drop_index('ix_incident_fingerprints_engine_phase_id', table_name='incident_fingerprints')

    op.drop_table('incident_fingerprints')
    op.drop_index('ix_incident_facets_kind_value', table_name='incident_facets')

    op.drop_table('incident_facets')
    op.drop_index(op.f('ix_fixes_incident_id'), table_name='fixes')

    op.drop_table('fixes')
    op.drop_index('ix_incidents_recommended_path', table_name='incidents')
    op.drop_index(op.f('ix_incidents_merged_into_id'), table_name='incidents')
    op.drop_index('ix_incidents_last_seen', table_name='incidents')
    op.drop_index(op.f('ix_incidents_fingerprint_hash'), table_name='incidents')
    op.drop_index(op.f('ix_incidents_exception'), table_name='incidents')
    op.drop_index('ix_incidents_engine_phase', table_name='incidents')

    op.drop_table('incidents')
