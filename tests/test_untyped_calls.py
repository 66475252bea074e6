"""Arguments of the wrong type, as a user's program passes them: without the run-time type
checks that this suite switches on (tests/conftest.py), which would stop these calls
before jaxmb's own checks. Before, most were accepted silently (a count cut to an integer,
a fractional coordinate index) or failed later with an error that named another object;
simulate's count was refused already and stays so."""

import json
import subprocess
import sys

import pytest

# Each case: a statement, and the exception type and message it must raise.
CASES = {
    "coordinate_fraction": ("mb.Coordinate(0.5)", "ModelError",
                            "Coordinate: a coordinate index must be an integer >= 0"),
    "coordinate_name": ("mb.Coordinate('hip')", "ModelError", "Coordinate: a coordinate index must be an integer >= 0"),
    "builder_body_text": ("mb.ModelBuilder('m').add_body('pelvis')", "ModelError",
                          "ModelBuilder 'm': add_body takes a jaxmb.Body, got str"),
    "builder_joint_tuple": ("mb.ModelBuilder('m').add_joint(('hip', 'ground'))", "ModelError",
                            "ModelBuilder 'm': add_joint takes a jaxmb.Joint, got tuple"),
    "builder_coordinate_number": ("mb.ModelBuilder('m').add_coordinate(3)", "ModelError",
                                  "Coordinate name must be a string, got 3"),
    "loop_steps_fraction": ("mb.LoopClosure(lambda f, q, p: f**2 + q**2 - 1.0, [0.0], [1.0], name='c', max_steps=2.7)",
                            "LoopClosureError", "max_steps an integer >= 1, got rtol=1e-12, atol=1e-12, max_steps=2.7"),
    "simulate_solver_number": ("mb.simulate(mb.models.double_pendulum(), jnp.zeros(2), jnp.zeros(2), t1=0.1, solver=3)",
                               "TypeError", "simulate: solver must be a name"),
    "simulate_controller_function": ("mb.simulate(mb.models.double_pendulum(), jnp.zeros(2), jnp.zeros(2), t1=0.1, "
                                     "controller=lambda t, q, qd: -q)", "TypeError",
                                     "simulate: controller must be a jaxmb.control.AbstractController"),
    "hill_model_arrays": ("mb.Thelen2003Muscle()(jnp.full(3, 0.5), jnp.full(3, 0.3), jnp.zeros(3))", "ValueError",
                          "Thelen2003Muscle: activation, length and lengthening_speed are scalars"),
    "function_paths_names": ("mb.io.write_function_paths(mb.load_osim(ARM26), '/nonexistent/x.xml', "
                             "['r_shoulder_elev'])", "TypeError",
                             "write_function_paths: coordinates must be the OpenSim coordinates"),
    "motion_degrees_text": ("mb.io.MotionData([0.0, 0.1], ('a',), [[1.0], [2.0]], in_degrees='no')", "TypeError",
                            "MotionData: in_degrees must be True or False, got 'no'"),
    # Flags given as text: bool('no') is True, so these switched the option on:
    "excitations_flag_text": ("mb.control.MuscleExcitations(mb.load_osim(ARM26), lambda t: jnp.full(6, 0.2), "
                              "inextensible_tendon='no')", "TypeError",
                              "MuscleExcitations: inextensible_tendon must be True or False, got 'no'"),
    "body_flag_text": ("mb.Body('b', 1.0, massless='false')", "TypeError",
                       "Body 'b': massless must be True or False, got 'false'"),
    "optimization_flag_text": ("mb.static_optimization(mb.load_osim(ARM26), np.linspace(0, 0.1, 3), np.zeros((3, 2)), "
                               "passive_forces='no')", "TypeError",
                               "static_optimization: passive_forces must be True or False, got 'no'"),
    # Counts and indices that int() cut silently (1.9 -> 1, 2.5 -> 2):
    "linear_index_fraction": ("mb.Linear((0, 1.9), (1.0, 1.0))", "ModelError",
                              "Linear: a coordinate index must be an integer >= 0"),
    "linear_single_index": ("mb.Linear(0, (1.0,))", "ModelError",
                            "Linear: indices must be a sequence of coordinate indices, got 0; write (0,) for one"),
    "knots_index_fraction": ("mb.io.PiecewiseLinear(0.5, [0.0, 1.0], [0.0, 1.0])", "ModelError",
                             "PiecewiseLinear: a coordinate index must be an integer >= 0"),
    "gcv_half_order_fraction": ("mb.io.GCVSpline.fit(0, np.linspace(0, 1, 8), np.linspace(0, 1, 8)**3, 2.5)",
                                "ModelError", "half_order must be an integer >= 1, got 2.5"),
    "fourier_order_fraction": ("mb.FourierSeries.fit(0, np.linspace(0, 6, 40), np.sin(np.linspace(0, 6, 40)), "
                               "2.5, 1.0)", "ModelError",
                               "order (the number of harmonics) must be an integer >= 0, got 2.5"),
    # AttributeError: 'Model' object has no attribute 'nq' (or 'solve'), before:
    "premodel_model": ("mb.constraints.premodel(mb.models.four_bar(throw=False), [0.0], [1.0], 0.1)",
                       "LoopClosureError", "premodel: closure must be a jaxmb.LoopClosure"),
    # The imaginary part was dropped (NumPy's ComplexWarning only); text failed in JAX naming no argument:
    "polynomial_complex": ("mb.Polynomial(0, [1 + 1j, 2.0])", "ModelError",
                           "Polynomial: coefficients must be real, got dtype complex"),
    # float_array cast complex values to their real part wherever an element converted with it:
    "wrap_radius_complex": ("mb.WrapSphere('s', 'ground', 0.05 + 0.01j)", "ModelError",
                            "WrapSphere 's' radius must be real, got dtype complex"),
    "pid_gain_complex": ("mb.control.PID(0, 0.0, 1.0 + 2.0j)", "ModelError", "PID: kp must be real, got dtype complex"),
    "hill_parameter_complex": ("mb.Thelen2003Muscle(1000.0 + 5.0j)", "ModelError",
                               "muscle 'Thelen2003Muscle': max_isometric_force must be real, got dtype complex"),
    "actuators_without_model": ("mb.io.read_actuators('/nonexistent/reserves.xml', None)", "TypeError",
                                "read_actuators: model must be the jaxmb.Model the actuators act on, got NoneType"),
    # A third time was ignored; a scalar failed with Python's "'float' object is not subscriptable":
    "time_range_three": ("mb.inverse_dynamics_motion(mb.models.double_pendulum(), np.linspace(0, 1, 11), "
                         "np.zeros((11, 2)), time_range=(0.1, 0.2, 0.3))", "ValueError",
                         "time_range must be two times (start, end) in s, each a number or +-inf, got (0.1, 0.2, 0.3)"),
    "time_range_scalar": ("mb.inverse_dynamics_motion(mb.models.double_pendulum(), np.linspace(0, 1, 11), "
                          "np.zeros((11, 2)), time_range=0.5)", "ValueError", "time_range must be two times"),
    # int() cut the index 1.7 to 1; no index failed at the first step with JAX's "Indexer must have integer ...":
    "pid_index_fraction": ("mb.control.PID(1.7, 1.0, 30.0)", "ModelError",
                           "PID: a coordinate index must be an integer"),
    "pid_no_index": ("mb.control.PID([], 1.0, 30.0)", "ValueError", "PID: indices must be one or more distinct"),
    # "'list' object has no attribute 'shape'", and JAX's "the first argument must be callable":
    "excitations_list": ("mb.control.MuscleExcitations(mb.load_osim(ARM26), lambda t: [0.2] * 6); "
                         "raise RuntimeError('built')", "RuntimeError", "built"),
    "excitations_not_callable": ("mb.control.MuscleExcitations(mb.load_osim(ARM26), np.full(6, 0.2))", "TypeError",
                                 "MuscleExcitations: excitation must be a callable t -> (n_muscles,) excitations, "
                                 "got ndarray"),
    "computed_torque_not_callable": ("mb.control.ComputedTorque(mb.models.double_pendulum(), np.zeros(2), 1.0, 1.0)",
                                     "TypeError", "ComputedTorque: reference must be a callable"),
    # Accepted before (text or a bool read as a flag or a count, 2.7 frames cut to 2):
    "chain_text": ("mb.models.planar_chain('3')", "ValueError", "planar_chain needs a whole number n >= 1 of rods"),
    "squeezer_flag_text": ("mb.models.andrews_squeezer(embedded='no')", "TypeError",
                           "andrews_squeezer: embedded must be True or False, got 'no'"),
    "five_bar_branch_bool": ("mb.models.five_bar(branch=True)", "ValueError", "five_bar: branch must be 1 or -1"),
    "sweep_optimize_text": ("mb.moment_arm_sweep(mb.load_osim(ARM26), 'r_elbow_flex', n=3, optimize='no')",
                            "TypeError", "moment_arm_sweep: optimize must be True or False, got 'no'"),
    "sweep_progress_text": ("mb.moment_arm_sweep(mb.load_osim(ARM26), 'r_elbow_flex', n=3, progress='yes')",
                            "TypeError", "moment_arm_sweep: progress must be None or a callable"),
    "shoulder_frames_fraction": ("mb.studies.track_shoulder(mb.models.three_link_arm(), t1=0.05, n_frames=2.7)",
                                 "ValueError", "track_shoulder: n_frames must be an integer >= 2"),
    # numpy read the text as a dtype's name (a SyntaxError from ast), a dict failed in JAX's dtype code:
    "q_text": ("mb.muscle_lengths(mb.load_osim(ARM26), '0 0')", "ModelError",
               "muscle_lengths: q must be numbers, got '0 0'"),
    "q_dict": ("mb.mass_matrix(mb.models.double_pendulum(), {'theta1': 0.0})", "ModelError",
               "mass_matrix: q must be numbers, got {'theta1': 0.0}"),
    # "simulate: q0 must be finite", and "'function' object has no attribute 'period'":
    "shoulder_t1_nan": ("mb.studies.track_shoulder(mb.models.three_link_arm(), t1=float('nan'))", "ValueError",
                        "track_shoulder: t1 must be a positive finite time (s), got nan"),
    "shoulder_plain_reference": ("mb.studies.track_shoulder(mb.models.three_link_arm(), "
                                 "lambda t: (jnp.zeros(3),) * 3)", "TypeError",
                                 "track_shoulder: trajectory must be a studies.ElevationTrajectory, got function"),
    "simulate_throw_text": ("mb.simulate(mb.models.double_pendulum(), jnp.zeros(2), jnp.zeros(2), t1=0.1, "
                            "throw='no')", "TypeError", "simulate: throw must be True or False, got 'no'"),
    "constant_text": ("mb.Constant('1.0')", "ModelError", "Constant joint function: value must be numbers, got '1.0'"),
    # Swapped or wrapped arguments: an AttributeError on .forces or .source, or 'not iterable':
    "function_paths_swapped": ("mb.io.write_function_paths('/nonexistent/x.xml', mb.load_osim(ARM26), [])",
                               "TypeError", "write_function_paths: model must be a jaxmb.Model"),
    "function_paths_import": ("mb.io.write_function_paths(mb.load_osim(ARM26), '/nonexistent/x.xml', "
                              "mb.io.read_osim(ARM26))", "TypeError",
                              "write_function_paths: coordinates must be the import's .coordinates"),
    "motion_swapped": ("mb.io.coordinates_from_motion(mb.io.MotionData([0.0], ('a',), [[1.0]]), "
                       "mb.models.double_pendulum())", "TypeError",
                       "coordinates_from_motion: takes a jaxmb.Model and a MotionData"),
    "simulate_steps_fraction": ("mb.simulate(mb.models.double_pendulum(), jnp.zeros(2), jnp.zeros(2), t1=0.1, "
                                "max_steps=2.7)", "ValueError", "simulate: max_steps must be an integer >= 1, got 2.7"),
}

_SCRIPT = """
import json, sys
import jax
jax.config.update("jax_enable_x64", True)
import jax.numpy as jnp
import numpy as np
import pathlib
import warnings
import jaxmb as mb
ARM26 = str(pathlib.Path(mb.__file__).parent / "data" / "arm26.osim")
warnings.simplefilter("ignore")
out = {}
for name, statement in json.loads(sys.argv[1]).items():
    try:
        exec(statement)
        out[name] = ["no error", ""]
    except Exception as e:
        out[name] = [type(e).__name__, str(e)]
print(json.dumps(out))
"""


@pytest.fixture(scope="module")
def outcomes():
    run = subprocess.run([sys.executable, "-c", _SCRIPT, json.dumps({k: v[0] for k, v in CASES.items()})],
                         capture_output=True, text=True, check=True, timeout=300)
    return json.loads(run.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_wrong_type_is_named_where_it_is_given(outcomes, case):
    _, kind, message = CASES[case]
    got_kind, got_message = outcomes[case]
    assert got_kind == kind and message in got_message, (got_kind, got_message)
