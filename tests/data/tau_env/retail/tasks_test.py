# Fictional tasks in τ-bench's shape: read with ast by the importer, never run.
from tau_bench.types import Action, Task

TASKS_TEST = [
    Task(
        annotator="0",
        user_id="ada_lane_1",
        instruction=(
            "You are Ada Lane (ada.lane@example.com). "
            "You ordered a teapot by mistake and want order #C100 cancelled."
        ),
        actions=[
            Action(name="find_user_id_by_email", kwargs={"email": "ada.lane@example.com"}),
            Action(name="get_order_details", kwargs={"order_id": "#C100"}),
            Action(name="cancel_pending_order", kwargs={"order_id": "#C100", "reason": "ordered by mistake"}),
        ],
        outputs=[],
    ),
    Task(
        annotator="0",
        user_id="ada_lane_1",
        instruction="You are Ada Lane (ada.lane@example.com). You want to know what your two orders cost together.",
        actions=[
            Action(name="find_user_id_by_email", kwargs={"email": "ada.lane@example.com"}),
            Action(name="get_order_details", kwargs={"order_id": "#C100"}),
            Action(name="get_order_details", kwargs={"order_id": "#C101"}),
            Action(name="calculate", kwargs={"expression": "24.25 + 26.0"}),
        ],
        outputs=["50.25"],
    ),
    Task(
        annotator="0",
        user_id="bo_reyes_2",
        instruction=(
            "You are Bo Reyes (bo.reyes@example.com). Pay order #C200 with your gift card "
            "instead of PayPal; if the card cannot cover it, keep PayPal."
        ),
        actions=[
            Action(name="find_user_id_by_email", kwargs={"email": "bo.reyes@example.com"}),
            Action(name="get_user_details", kwargs={"user_id": "bo_reyes_2"}),
            Action(
                name="modify_pending_order_payment",
                kwargs={"order_id": "#C200", "payment_method_id": "gift_card_22"},
            ),
        ],
        outputs=[],
    ),
]
