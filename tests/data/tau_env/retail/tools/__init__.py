from .calculate import Calculate
from .cancel_pending_order import CancelPendingOrder
from .find_user_id_by_email import FindUserIdByEmail
from .get_order_details import GetOrderDetails
from .get_user_details import GetUserDetails
from .modify_pending_order_payment import ModifyPendingOrderPayment
from .think import Think
from .transfer_to_human_agents import TransferToHumanAgents

ALL_TOOLS = [
    FindUserIdByEmail,
    GetUserDetails,
    GetOrderDetails,
    CancelPendingOrder,
    ModifyPendingOrderPayment,
    Calculate,
    Think,
    TransferToHumanAgents,
]
