"""Fit the fusion, answerability and block knobs to golden queries, and save them as a profile.

python manage.py calibrate --golden support-bot --dry-run
python manage.py calibrate --golden support-bot --holdout 0.3 --min-block-recall 0.7 --dry-run
python manage.py calibrate --golden c1 --golden c2 --save-profile conversations --json
python manage.py calibrate --golden c1 --profile conversations --dry-run   # does the profile hold?
"""

from __future__ import annotations

from django.core.management.base import CommandError

from memoryui.management.base import ReportingCommand
from recall import calibration
from recall.models import GoldenSet, RecallProfile
from searchindex.documents import IndexUnavailable
from searchindex.indexes import get_index


class Command(ReportingCommand):
    help = "Search the fusion, answerability and block knobs on golden sets; print before/after; save the winner."

    def add_arguments(self, parser):
        parser.add_argument(
            "--golden",
            action="append",
            required=True,
            metavar="SET",
            help="a golden set's name (or its id, for a name used in several scopes), repeatable",
        )
        parser.add_argument("--profile", default=None, help="the profile to start from (default: default)")
        parser.add_argument(
            "--min-answered",
            type=float,
            metavar="SHARE",
            help="answer at least this share (0..1) of the queries that expect memories, and within that keep "
            "as many of the others silent as possible (default: the best balance of the two)",
        )
        parser.add_argument(
            "--holdout",
            type=float,
            default=0.0,
            metavar="SHARE",
            help="cross-validate: deal the queries into round(1/SHARE) folds (SHARE up to 0.5), hold each out in "
            "turn while fitting on the others, and report every metric out of sample beside the in-sample numbers",
        )
        parser.add_argument(
            "--block-beta",
            type=float,
            default=1.0,
            metavar="BETA",
            help="fit the block for the F-measure of its precision and recall with this beta (below 1 favours "
            "precision; default 1)",
        )
        parser.add_argument(
            "--min-block-recall",
            type=float,
            metavar="SHARE",
            help="instead: the best block precision that keeps block recall at least this high (0..1)",
        )
        parser.add_argument("--save-profile", metavar="NAME", help="save the calibrated knobs as this profile")
        parser.add_argument("--dry-run", action="store_true", help="change nothing, whatever else is asked")
        parser.add_argument("--json", action="store_true", help="print one JSON document on stdout")

    def handle(self, *args, **options):
        golden_sets = []
        for name in dict.fromkeys(options["golden"]):
            golden_sets.append(_golden_set(name))
        try:
            start_profile = RecallProfile.objects.resolve(options["profile"])
        except RecallProfile.DoesNotExist:
            raise CommandError(f"--profile: no profile named {options['profile']!r}") from None
        saving = options["save_profile"]
        if saving:
            form_error = _profile_name_error(saving)
            if form_error:
                raise CommandError(f"--save-profile: {form_error}")
        min_answered = options["min_answered"]
        if min_answered is not None and not 0 <= min_answered <= 1:
            raise CommandError(f"--min-answered: must be a share between 0 and 1, got {min_answered:g}")
        if not 0 <= options["holdout"] <= 0.5:
            raise CommandError(
                f"--holdout: must be a share from 0 up to 0.5 (at least two folds), got {options['holdout']:g}"
            )
        if options["min_block_recall"] is not None and not 0 <= options["min_block_recall"] <= 1:
            raise CommandError(
                f"--min-block-recall: must be a share between 0 and 1, got {options['min_block_recall']:g}"
            )
        if options["block_beta"] <= 0:
            raise CommandError(f"--block-beta: must be above 0, got {options['block_beta']:g}")
        start = start_profile.settings
        try:
            samples, skipped = calibration.collect(golden_sets, start.retrieval)
            result = calibration.calibrate_recall(
                samples,
                start,
                min_answered=min_answered,
                skipped=skipped,
                holdout=options["holdout"],
                beta=options["block_beta"],
                min_block_recall=options["min_block_recall"],
            )
            embedder = get_index("vector").embedder
        except calibration.CalibrationRefused as exc:
            raise CommandError(str(exc)) from None
        except IndexUnavailable as exc:
            raise CommandError(f"{exc}; run `manage.py reindex --verify` to check the indexes") from None
        document = {
            "golden": [g.name for g in golden_sets],
            "start_profile": start_profile.name,
            "embedder": embedder.name,
            "dry_run": options["dry_run"],
            "saved_profile": None,
            **result.to_dict(),
        }
        if saving and not options["dry_run"]:
            profile = calibration.save_profile(saving, start, result, [g.name for g in golden_sets], embedder)
            document["saved_profile"] = profile.name
        if options["json"]:
            self.report(document)
            return
        self.stdout.write(_describe(document))


def _profile_name_error(name: str) -> str | None:
    field = RecallProfile._meta.get_field("name")
    try:
        field.run_validators(name)
    except Exception as exc:  # ValidationError: its messages say what is allowed
        return "; ".join(getattr(exc, "messages", [str(exc)]))
    return None


def _describe(document: dict) -> str:
    lines = [
        f"calibrated on {', '.join(document['golden'])}: {document['queries']} queries "
        f"({document['answerable']} expecting memories), starting from profile {document['start_profile']}, "
        f"embedder {document['embedder']}"
    ]
    lines += [f"skipped {why}" for why in document["skipped"]]
    before, after = document["before"], document["after"]
    holdout = document["holdout"]
    if holdout:
        lines.append(
            f"in sample: fitted on all {document['queries']} queries; out of sample: the same queries in "
            f"{holdout['folds']} folds dealt by a hash of each query ({holdout['deals']} deals), each scored with "
            "the knobs fitted without its fold; before → after"
        )
    for kind in ("answerable", "unanswerable", "objectives", "block"):
        for metric, value in before[kind].items():
            if metric == "queries":
                continue
            line = f"  {kind:<13} {metric:<14} {value:.3f} → {after[kind][metric]:.3f}"
            if holdout:
                line += f"   out of sample {holdout['before'][kind][metric]:.3f} → {holdout['after'][kind][metric]:.3f}"
            lines.append(line)
    if document["min_answered_met"] is False:
        lines.append(
            f"no setting answers {document['min_answered']:.0%} of the queries expecting memories; "
            f"these answer the most ({after['answerable']['answered']:.0%})"
        )
    changed = document["changed"]
    lines.append("changed: " + (", ".join(f"{k}={v}" for k, v in changed.items()) if changed else "nothing"))
    if document["saved_profile"]:
        lines.append(f"saved as profile {document['saved_profile']}")
    elif document["dry_run"]:
        lines.append("dry run: nothing saved")
    return "\n".join(lines)


def _golden_set(name: str) -> GoldenSet:
    """The golden set named `name`, or of id `name`; a name used in several scopes must be given by id."""
    found = list(GoldenSet.objects.filter(name=name))
    if not found and name.isdigit():
        found = list(GoldenSet.objects.filter(pk=int(name)))
    if len(found) == 1:
        return found[0]
    if found:
        where = ", ".join(f"{s.pk} in {s.scope}" for s in found)
        raise CommandError(f"--golden: {name!r} names a golden set in several scopes ({where}); give its id")
    known = ", ".join(GoldenSet.objects.values_list("name", flat=True).distinct()) or "none yet"
    raise CommandError(f"--golden: no golden set named {name!r}; known: {known}")
