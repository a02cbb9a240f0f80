! Fortran attributes and generalized requests through the mpi module: predefined
! attributes read as values (MPI_TAG_UB, MPI_WTIME_IS_GLOBAL with MPI_COMM_GET_ATTR and the
! MPI-1 MPI_ATTR_GET); a communicator key with Fortran copy and delete subroutines
! (MPI_COMM_SET_ATTR, MPI_COMM_DUP runs the copy subroutine, MPI_COMM_FREE and
! MPI_COMM_DELETE_ATTR the delete one, MPI_ATTR_PUT of a default INTEGER); a datatype key
! (MPI_TYPE_SET_ATTR, MPI_TYPE_DUP copies, MPI_TYPE_FREE deletes); a generalized request
! with Fortran query, free and cancel subroutines (MPI_GREQUEST_START, MPI_TEST before and
! after MPI_GREQUEST_COMPLETE, the status the query subroutine filled, MPI_CANCEL).
! Every value is checked; a failure calls MPI_Abort; a passing rank prints
! "PASS attrs_grequest rank <r>" last. Any number of ranks (1 to 4 tested).
module attr_callbacks
  use mpi
  implicit none
  integer :: copies = 0, deletes = 0, queries = 0, frees = 0, cancels = 0
  integer(kind=MPI_ADDRESS_KIND) :: last_deleted = -1
contains
  subroutine copy_fn(oldcomm, keyval, extra_state, attribute_val_in, attribute_val_out, flag, ierr)
    integer :: oldcomm, keyval, ierr
    integer(kind=MPI_ADDRESS_KIND) :: extra_state, attribute_val_in, attribute_val_out
    logical :: flag
    copies = copies + 1
    ! The copy is the old value plus the extra state: both reached us by reference.
    attribute_val_out = attribute_val_in + extra_state
    flag = .true.
    ierr = MPI_SUCCESS
  end subroutine copy_fn

  subroutine delete_fn(comm, keyval, attribute_val, extra_state, ierr)
    integer :: comm, keyval, ierr
    integer(kind=MPI_ADDRESS_KIND) :: attribute_val, extra_state
    deletes = deletes + 1
    last_deleted = attribute_val
    ierr = MPI_SUCCESS
  end subroutine delete_fn

  subroutine type_copy_fn(oldtype, keyval, extra_state, attribute_val_in, attribute_val_out, flag, ierr)
    integer :: oldtype, keyval, ierr
    integer(kind=MPI_ADDRESS_KIND) :: extra_state, attribute_val_in, attribute_val_out
    logical :: flag
    copies = copies + 1
    attribute_val_out = attribute_val_in * 2
    flag = .true.
    ierr = MPI_SUCCESS
  end subroutine type_copy_fn

  subroutine type_delete_fn(datatype, keyval, attribute_val, extra_state, ierr)
    integer :: datatype, keyval, ierr
    integer(kind=MPI_ADDRESS_KIND) :: attribute_val, extra_state
    deletes = deletes + 1
    last_deleted = attribute_val
    ierr = MPI_SUCCESS
  end subroutine type_delete_fn

  subroutine query_fn(extra_state, status, ierr)
    integer(kind=MPI_ADDRESS_KIND) :: extra_state
    integer :: status(MPI_STATUS_SIZE), ierr
    queries = queries + 1
    call MPI_Status_set_elements(status, MPI_INTEGER, int(extra_state), ierr)
    call MPI_Status_set_cancelled(status, .false., ierr)
    status(MPI_SOURCE) = 300 + int(extra_state)
    status(MPI_TAG) = 400 + int(extra_state)
    ierr = MPI_SUCCESS
  end subroutine query_fn

  subroutine free_fn(extra_state, ierr)
    integer(kind=MPI_ADDRESS_KIND) :: extra_state
    integer :: ierr
    frees = frees + 1
    ierr = MPI_SUCCESS
  end subroutine free_fn

  subroutine cancel_fn(extra_state, complete, ierr)
    integer(kind=MPI_ADDRESS_KIND) :: extra_state
    logical :: complete
    integer :: ierr
    cancels = cancels + 1
    if (complete) cancels = cancels + 10
    ierr = MPI_SUCCESS
  end subroutine cancel_fn
end module attr_callbacks

program attrs_grequest
  use mpi
  use attr_callbacks
  implicit none
  integer :: ierr, rank, nprocs, key, tkey, dup, tdup, req, cnt, old_style
  integer :: status(MPI_STATUS_SIZE)
  integer(kind=MPI_ADDRESS_KIND) :: val, extra, tag_ub
  logical :: flag

  call MPI_Init(ierr)
  call MPI_Comm_rank(MPI_COMM_WORLD, rank, ierr)
  call MPI_Comm_size(MPI_COMM_WORLD, nprocs, ierr)

  ! Predefined attributes: the value itself, not its address.
  call MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, tag_ub, flag, ierr)
  call check(ierr == MPI_SUCCESS .and. flag .and. tag_ub >= 32767, 'MPI_TAG_UB value')
  call MPI_Attr_get(MPI_COMM_WORLD, MPI_TAG_UB, old_style, flag, ierr)
  call check(flag .and. int(tag_ub) == old_style, 'MPI_ATTR_GET of MPI_TAG_UB')
  call MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_WTIME_IS_GLOBAL, val, flag, ierr)
  call check(ierr == MPI_SUCCESS .and. (.not. flag .or. val == 0 .or. val == 1), &
             'MPI_WTIME_IS_GLOBAL')

  ! A communicator key with Fortran copy and delete subroutines.
  extra = 1000
  call MPI_Comm_create_keyval(copy_fn, delete_fn, key, extra, ierr)
  call check(ierr == MPI_SUCCESS, 'MPI_Comm_create_keyval')
  val = 42 + rank
  call MPI_Comm_set_attr(MPI_COMM_WORLD, key, val, ierr)
  val = -1
  call MPI_Comm_get_attr(MPI_COMM_WORLD, key, val, flag, ierr)
  call check(flag .and. val == 42 + rank, 'get what was set')
  call MPI_Comm_dup(MPI_COMM_WORLD, dup, ierr)
  call check(copies == 1, 'MPI_Comm_dup ran the copy subroutine once')
  call MPI_Comm_get_attr(dup, key, val, flag, ierr)
  call check(flag .and. val == 1042 + rank, 'the copy subroutine''s value on the duplicate')
  call MPI_Comm_free(dup, ierr)
  call check(deletes == 1 .and. last_deleted == 1042 + rank, 'MPI_Comm_free ran the delete subroutine')
  ! MPI-1's MPI_ATTR_PUT of a default INTEGER replaces the value (deleting the old one).
  old_style = -7
  call MPI_Attr_put(MPI_COMM_WORLD, key, old_style, ierr)
  call check(deletes == 2 .and. last_deleted == 42 + rank, 'replacing runs the delete subroutine')
  call MPI_Comm_get_attr(MPI_COMM_WORLD, key, val, flag, ierr)
  call check(flag .and. val == -7, 'a negative INTEGER reads back as itself')
  call MPI_Comm_delete_attr(MPI_COMM_WORLD, key, ierr)
  call check(deletes == 3 .and. last_deleted == -7, 'MPI_Comm_delete_attr')
  call MPI_Comm_get_attr(MPI_COMM_WORLD, key, val, flag, ierr)
  call check(.not. flag, 'deleted attribute is gone')
  call MPI_Comm_free_keyval(key, ierr)

  ! A datatype key.
  copies = 0
  deletes = 0
  call MPI_Type_create_keyval(type_copy_fn, type_delete_fn, tkey, extra, ierr)
  val = 21
  call MPI_Type_set_attr(MPI_INTEGER, tkey, val, ierr)
  call check(ierr == MPI_SUCCESS, 'MPI_Type_set_attr on a predefined type')
  call MPI_Type_dup(MPI_INTEGER, tdup, ierr)
  call MPI_Type_get_attr(tdup, tkey, val, flag, ierr)
  call check(copies == 1 .and. flag .and. val == 42, 'MPI_Type_dup copies through the subroutine')
  call MPI_Type_free(tdup, ierr)
  call check(deletes == 1 .and. last_deleted == 42, 'MPI_Type_free deletes')
  call MPI_Type_delete_attr(MPI_INTEGER, tkey, ierr)
  call check(deletes == 2 .and. last_deleted == 21, 'MPI_Type_delete_attr')
  call MPI_Type_free_keyval(tkey, ierr)

  ! A generalized request with Fortran callbacks.
  extra = 5 + rank
  call MPI_Grequest_start(query_fn, free_fn, cancel_fn, extra, req, ierr)
  call check(ierr == MPI_SUCCESS, 'MPI_Grequest_start')
  call MPI_Test(req, flag, status, ierr)
  call check(.not. flag .and. queries == 0, 'MPI_Test before completion')
  call MPI_Cancel(req, ierr)
  call check(cancels == 1, 'MPI_Cancel ran the cancel subroutine (not complete)')
  call MPI_Grequest_complete(req, ierr)
  call MPI_Test(req, flag, status, ierr)
  call check(flag .and. req == MPI_REQUEST_NULL .and. queries == 1 .and. frees == 1, &
             'MPI_Test after completion ran query and free')
  call MPI_Get_count(status, MPI_INTEGER, cnt, ierr)
  call check(cnt == 5 + rank .and. status(MPI_SOURCE) == 305 + rank .and. &
             status(MPI_TAG) == 405 + rank, 'the status the query subroutine filled')

  call MPI_Barrier(MPI_COMM_WORLD, ierr)
  print '(A,I0)', 'PASS attrs_grequest rank ', rank
  call MPI_Finalize(ierr)

contains
  subroutine check(ok, what)
    logical, intent(in) :: ok
    character(len=*), intent(in) :: what
    integer :: e
    if (.not. ok) then
      print '(A,I0,A,A)', 'FAIL rank ', rank, ': ', what
      call MPI_Abort(MPI_COMM_WORLD, 3, e)
    end if
  end subroutine check
end program attrs_grequest
