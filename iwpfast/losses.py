"""GLM losses: name -> integer code, and their scalar derivatives f^(n) in NumPy (the spec).

(Placeholder: the codes are the contract; the derivative functions land with the math issue.)
"""
LOSS_CODES = {"exponential": 0, "quadratic": 1, "logistic": 2, "squared_error": 3}
CLASSIFICATION_LOSSES = ("exponential", "quadratic", "logistic")
REGRESSION_LOSSES = ("squared_error",)
