module gpu-admission.io/bench/fixed_webhook

go 1.22
