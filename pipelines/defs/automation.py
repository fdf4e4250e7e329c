"""The sensor that evaluates the assets' declarative automation conditions (`full_compaction` and
`snapshot_expiry` on cron, `eager` on the changelog consumer `daily_revenue`). Declared
here, stopped by default like the sorted-run sensor and the schedule, so that nothing runs
unattended until someone turns it on (UI: Automation, or `dagster sensor start`)."""

import dagster as dg

automation_condition_sensor = dg.AutomationConditionSensorDefinition(
    "lakehouse_automation", target=dg.AssetSelection.all(), minimum_interval_seconds=60,
    default_status=dg.DefaultSensorStatus.STOPPED,
    description="Evaluates the automation conditions of every asset (on_cron for full compaction "
                "and snapshot expiry, eager for daily_revenue).")

defs = dg.Definitions(sensors=[automation_condition_sensor])
