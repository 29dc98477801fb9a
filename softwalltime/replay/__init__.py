"""The replay side: workload traces in, what the predictors would have done out.

Sources (SWF traces, PBS accounting logs, the history table), the accuracy replay
(``softwalltime evaluate``) and its figures. Runs the hook path's own predictors.
"""
