"""mylb, an example load balancer kept outside xenobench's repository.

This module is what xenobench reads to list the kind (pyproject.toml's entry point in the group
`xenobench.lbs` names KIND): it must stay light. The driver (xenobench_mylb.driver) is imported only
when xenobench drives the LB; the agent (xenobench_mylb.agent) runs on the LB node.
"""

from xenobench.lb import LBKind

KIND = LBKind(name="mylb", label="mylb (out-of-tree example)", module="xenobench_mylb.driver",
              split_by="hash of source address and port")
