"""The replay side: workload traces in, what the predictors and the scheduler would have
done out (no ``pbs``; :mod:`.history` and :mod:`.calibrate` read and write the database).

- the workload: :mod:`.trace` (Trace, TraceJob), read from SWF traces and PBS accounting
  logs (:mod:`.trace_readers`, within :mod:`.bounds`) or the history table (:mod:`.history`);
- the accuracy replay (``softwalltime evaluate``): :mod:`.evaluate`, the hook's own
  predictors; the calibration table of predictor calibrated (:mod:`.calibrate`,
  :mod:`.prior`);
- the scheduler simulation (``softwalltime simulate``): :mod:`.simulate` (the estimate
  sources :mod:`.sources`, the jobs :mod:`.sim_workload`), FCFS + EASY/depth-K
  (:mod:`.easy`, :mod:`.profile`, :mod:`.corrections`, compiled by :mod:`.native`), the
  PBS scheduler model (:mod:`.pbsched`, :mod:`.rank`), its policy search (:mod:`.search`)
  and formula search (:mod:`.formula`, :mod:`.tune`); the runs of ``simulate`` that drive
  them (:mod:`.runs`, for the CLI and :mod:`softwalltime.api`) in worker processes that get
  their inputs as arguments (:mod:`.parallel`);
- their figures (:mod:`.plots`).
"""
