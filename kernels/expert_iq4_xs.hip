/* expert_grouped kernels with iq4_xs weights (see expert_impl.h). */
#include "expert_impl.h"
template st_rt_error st_launch_gate_up<T_IQ4_XS>(const st_launch &, const st_expert_args &, const st_expert_plan &);
template st_rt_error st_launch_down<T_IQ4_XS>(const st_launch &, const st_expert_args &, const st_expert_plan &);
