"""Roles: the viewer, editor and admin groups with their Django permissions, and tokens that are
read or write.

Existing tokens become `write`, so agents keep working; existing users keep what they could do:
superusers join `admin`, staff users `editor`, the rest stay viewers (no group).
"""

from django.conf import settings
from django.contrib.auth.management import create_permissions
from django.db import migrations, models

from memoryui import roles


def create_groups(apps, schema_editor):
    using = schema_editor.connection.alias
    # Permissions are created after migrate (post_migrate); make those of the models migrated so far
    # now, so the groups get them. Apps migrated later join them by memoryui.roles.sync_groups_after_migrate.
    for app_config in apps.get_app_configs():
        app_config.models_module = True
        create_permissions(app_config, apps=apps, verbosity=0, using=using)
        app_config.models_module = None
    roles.sync_groups(apps, using=using)
    roles.assign_existing_users(apps, using=using)


class Migration(migrations.Migration):
    dependencies = [
        ("memoryui", "0008_transcript_external_id"),
        ("auth", "0012_alter_user_first_name_max_length"),
        ("contenttypes", "0002_remove_content_type_name"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.AddField(
            model_name="apitoken",
            name="access",
            field=models.CharField(
                choices=[("read", "Read"), ("write", "Write")],
                default="write",
                help_text="read: only reads (and recalls); write: may also change memories, within its owner's role.",
                max_length=5,
            ),
        ),
        migrations.RunPython(create_groups, migrations.RunPython.noop),
    ]
