"""Field labels and help texts of Memory (what the forms and the back office show), and plurals
that read right ("memories", "index outbox entries", "API tokens")."""

import django.core.validators
import django.utils.timezone
import memoryui.models.fields
import uuid
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('memoryui', '0009_roles_and_token_access'),
    ]

    operations = [
        migrations.AlterModelOptions(
            name='apitoken',
            options={'ordering': ['-created_at'], 'verbose_name': 'API token'},
        ),
        migrations.AlterModelOptions(
            name='indexoutbox',
            options={'ordering': ['queued_at'], 'verbose_name': 'index outbox entry', 'verbose_name_plural': 'index outbox entries'},
        ),
        migrations.AlterModelOptions(
            name='memory',
            options={'ordering': ['-updated_at', '-id'], 'verbose_name_plural': 'memories'},
        ),
        migrations.AlterField(
            model_name='memory',
            name='access_count',
            field=models.PositiveIntegerField(default=0, verbose_name='accesses'),
        ),
        migrations.AlterField(
            model_name='memory',
            name='accessed_at',
            field=models.DateTimeField(blank=True, null=True, verbose_name='last accessed'),
        ),
        migrations.AlterField(
            model_name='memory',
            name='confidence',
            field=models.FloatField(default=0.7, help_text='0 to 1: how sure the writer was.', validators=[django.core.validators.MinValueValidator(0.0), django.core.validators.MaxValueValidator(1.0)], verbose_name='confidence'),
        ),
        migrations.AlterField(
            model_name='memory',
            name='content_hash',
            field=models.CharField(editable=False, max_length=64, verbose_name='content hash'),
        ),
        migrations.AlterField(
            model_name='memory',
            name='created_at',
            field=models.DateTimeField(default=django.utils.timezone.now, verbose_name='created at'),
        ),
        migrations.AlterField(
            model_name='memory',
            name='entity_key',
            field=models.CharField(blank=True, help_text='type:value, e.g. phone:18600000000; one active memory per key in a scope.', max_length=255, null=True, verbose_name='entity key'),
        ),
        migrations.AlterField(
            model_name='memory',
            name='expires_at',
            field=models.DateTimeField(blank=True, help_text='When decay tombstones it (only unpinned peripheral memories decay); ISO 8601 with a time zone, e.g. 2030-01-01T00:00:00Z.', null=True, verbose_name='expires at'),
        ),
        migrations.AlterField(
            model_name='memory',
            name='id',
            field=models.UUIDField(default=uuid.uuid4, editable=False, primary_key=True, serialize=False, verbose_name='ID'),
        ),
        migrations.AlterField(
            model_name='memory',
            name='importance',
            field=models.FloatField(help_text='0 to 1: how much it weighs in recall.', validators=[django.core.validators.MinValueValidator(0.0), django.core.validators.MaxValueValidator(1.0)], verbose_name='importance'),
        ),
        migrations.AlterField(
            model_name='memory',
            name='kind',
            field=models.CharField(choices=[('entity', 'Entity'), ('preference', 'Preference'), ('fact', 'Fact'), ('project_state', 'project state'), ('relationship', 'Relationship'), ('procedure', 'Procedure'), ('remember', 'Remember'), ('summary', 'Summary'), ('note', 'Note')], help_text='What sort of knowledge it is; the tier follows from it.', max_length=20, verbose_name='kind'),
        ),
        migrations.AlterField(
            model_name='memory',
            name='metadata',
            field=models.JSONField(blank=True, decoder=memoryui.models.fields.StoredJSONDecoder, default=dict, help_text='A JSON object: tags, tool names, where it came from, e.g. {"tags": ["ops"]}.', verbose_name='metadata'),
        ),
        migrations.AlterField(
            model_name='memory',
            name='pinned',
            field=models.BooleanField(default=False, help_text='A pinned memory never decays and is boosted in recall.', verbose_name='pinned'),
        ),
        migrations.AlterField(
            model_name='memory',
            name='scope',
            field=models.CharField(help_text='Whose memory it is, e.g. agent:main, user:42, project:x, global; a bare id means agent:<id>.', max_length=200, verbose_name='scope'),
        ),
        migrations.AlterField(
            model_name='memory',
            name='source',
            field=models.CharField(choices=[('user', 'User'), ('remember', 'Remember'), ('extractor:l0', 'Extractor L0'), ('extractor:l1', 'Extractor L1'), ('compaction', 'Compaction'), ('import', 'Import'), ('manual', 'Manual'), ('cleanup', 'Cleanup')], default='manual', help_text='Who wrote it.', max_length=16, verbose_name='source'),
        ),
        migrations.AlterField(
            model_name='memory',
            name='status',
            field=models.CharField(choices=[('active', 'Active'), ('tombstoned', 'Tombstoned')], default='active', help_text='A tombstoned memory is left out of search and recall, and can be restored.', max_length=12, verbose_name='status'),
        ),
        migrations.AlterField(
            model_name='memory',
            name='text',
            field=models.TextField(help_text='One self-contained statement.', verbose_name='text'),
        ),
        migrations.AlterField(
            model_name='memory',
            name='tier',
            field=models.CharField(choices=[('core', 'Core'), ('working', 'Working'), ('peripheral', 'Peripheral')], help_text='core: identity and stable preferences; working: the usual; peripheral: low value, expires.', max_length=12, verbose_name='tier'),
        ),
        migrations.AlterField(
            model_name='memory',
            name='tombstone_reason',
            field=models.TextField(blank=True, verbose_name='tombstone reason'),
        ),
        migrations.AlterField(
            model_name='memory',
            name='tombstoned_at',
            field=models.DateTimeField(blank=True, null=True, verbose_name='tombstoned at'),
        ),
        migrations.AlterField(
            model_name='memory',
            name='updated_at',
            field=models.DateTimeField(default=django.utils.timezone.now, verbose_name='updated at'),
        ),
    ]
